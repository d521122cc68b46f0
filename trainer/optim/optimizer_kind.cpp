// optimizer_kind.cpp
#include "trainer/optim/optimizer_kind.h"

#include "kernels/error.h"

namespace ddp {

OptimizerKind parse_optimizer_kind(const std::string& text) {
  if (text == "sgd") return OptimizerKind::Sgd;
  if (text == "adamw") return OptimizerKind::AdamW;
  throw Error("--optimizer: '" + text + "' is not one of sgd, adamw");
}

const char* optimizer_kind_name(OptimizerKind kind) { return kind == OptimizerKind::AdamW ? "adamw" : "sgd"; }

}  // namespace ddp
