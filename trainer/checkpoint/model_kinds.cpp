// model_kinds.cpp: the kinds are the models' own (their specs), listed once.
#include "trainer/checkpoint/model_kinds.h"

#include <algorithm>

#include "kernels/error.h"
#include "trainer/models/gpt/gpt_spec.h"
#include "trainer/models/mlp/mlp_spec.h"

namespace ddp {
namespace {

std::vector<ModelKind>& kinds() {
  static std::vector<ModelKind> all = {mlp_spec().kind, gpt_spec().kind};
  return all;
}

const ModelKind* find_kind(const std::string& name) {
  for (const ModelKind& k : kinds())
    if (k.name == name) return &k;
  return nullptr;
}

}  // namespace

std::vector<std::string> model_kind_names() {
  std::vector<std::string> names;
  for (const ModelKind& k : kinds()) names.push_back(k.name);
  return names;
}

std::vector<std::string> model_activation_names() {
  std::vector<std::string> names;
  for (const ModelKind& k : kinds())
    for (const std::string& a : k.activations)
      if (std::find(names.begin(), names.end(), a) == names.end()) names.push_back(a);
  return names;
}

void register_model_kind(const ModelKind& kind) {
  DDP_REQUIRE(!kind.name.empty() && kind.dims_problem != nullptr,
              "register_model_kind: a kind needs a name and a dims check");
  if (find_kind(kind.name) != nullptr) throw Error("model kind '" + kind.name + "' is registered already");
  kinds().push_back(kind);
}

std::string checkpoint_dims_problem(const std::vector<int64_t>& dims, uint64_t& count) {
  return mlp_spec().kind.dims_problem(dims, count);
}

std::string checkpoint_dims_problem(const std::string& model_kind, const std::vector<int64_t>& dims, uint64_t& count) {
  const ModelKind* kind = find_kind(model_kind);
  if (kind == nullptr) return "model kind '" + model_kind + "' is not one of the known kinds";
  return kind->dims_problem(dims, count);
}

std::string dims_text(const std::vector<int64_t>& dims) { return dims.empty() ? "(none)" : mlp_widths_text(dims, ","); }

}  // namespace ddp
