// recompute.cpp
#include "trainer/models/layers/recompute.h"

#include "kernels/error.h"

namespace ddp {

Recompute parse_recompute(const std::string& text) {
  if (text == "none") return Recompute::None;
  if (text == "light") return Recompute::Light;
  if (text == "block") return Recompute::Block;
  throw Error("--recompute: '" + text + "' is not one of none, light, block");
}

const char* recompute_name(Recompute level) {
  switch (level) {
    case Recompute::Light:
      return "light";
    case Recompute::Block:
      return "block";
    case Recompute::None:
      break;
  }
  return "none";
}

}  // namespace ddp
