// model_kinds.cpp: a case per model kind (the MLP, the GPT).
#include "trainer/models/model_kinds.h"

#include "trainer/models/gpt_config.h"
#include "trainer/models/mlp_config.h"

namespace ddp {

const std::vector<std::string>& model_kind_names() {
  static const std::vector<std::string> names = {"mlp", "gpt"};
  return names;
}

std::string checkpoint_dims_problem(const std::vector<int64_t>& dims, uint64_t& count) {
  return mlp_dims_problem(dims, count);
}

std::string checkpoint_dims_problem(const std::string& model_kind, const std::vector<int64_t>& dims,
                                    uint64_t& count) {
  return model_kind == "gpt" ? gpt_dims_problem(dims, count) : mlp_dims_problem(dims, count);
}

std::string dims_text(const std::vector<int64_t>& dims) {
  return dims.empty() ? "(none)" : mlp_widths_text(dims, ",");
}

}  // namespace ddp
