// model_catalog.cpp: the MLP is the only model so far; each function is the
// place a second one adds its case.
#include "trainer/models/model_catalog.h"

#include "trainer/models/mlp_config.h"

namespace ddp {

ParameterRegistry model_parameters(const TrainConfig& c) { return mlp_parameters(c.mlp); }

std::vector<int64_t> model_dims(const TrainConfig& c) { return mlp_dims(c.mlp); }

std::string model_activation_name(const TrainConfig& c) { return c.mlp.activation_name; }
std::string model_kind_name(const TrainConfig&) { return "mlp"; }

std::string model_summary(const TrainConfig& c) {
  return "MLP " + mlp_widths_text(mlp_dims(c.mlp)) + " " + c.mlp.activation_name;
}

std::string model_shape_text(const TrainConfig& c) { return mlp_widths_text(mlp_dims(c.mlp)); }

double model_flops_per_sample(const TrainConfig& c) { return mlp_flops_per_sample(mlp_dims(c.mlp)); }

std::string checkpoint_dims_problem(const std::vector<int64_t>& dims, uint64_t& count) {
  return mlp_dims_problem(dims, count);
}

std::string dims_text(const std::vector<int64_t>& dims) {
  return dims.empty() ? "(none)" : mlp_widths_text(dims, ",");
}

int64_t model_input_width(const TrainConfig& c) { return mlp_dims(c.mlp).front(); }
int64_t model_output_width(const TrainConfig& c) { return mlp_dims(c.mlp).back(); }

void check_model_matches_data(const TrainConfig& c, const TrainTestData& data) {
  check_mlp_matches_data(c.mlp, c.loss, data);
}

}  // namespace ddp
