// mlp_spec.cpp: the MLP as the model table describes it.
#include "trainer/models/mlp/mlp_spec.h"

#include "trainer/models/mlp/mlp_model.h"

namespace ddp {
namespace {

ParameterRegistry parameters(const MlpConfig& m) { return mlp_parameters(m); }
std::vector<int64_t> dims(const MlpConfig& m) { return mlp_dims(m); }
std::string activation_name(const MlpConfig& m) { return m.activation_name; }
std::string summary(const MlpConfig& m) { return "MLP " + mlp_widths_text(m.layer_widths) + " " + m.activation_name; }
std::string shape_text(const MlpConfig& m) { return mlp_widths_text(m.layer_widths); }
double flops_per_sample(const MlpConfig& m) { return mlp_flops_per_sample(m.layer_widths); }
int64_t no_tokens(const MlpConfig&) { return 0; }
int64_t input_width(const MlpConfig& m) { return m.layer_widths.front(); }
int64_t output_width(const MlpConfig& m) { return m.layer_widths.back(); }
std::unique_ptr<Model> make(const MlpConfig& m, Backend& backend, int max_batch) {
  return std::make_unique<MlpModel>(backend, m, max_batch);
}

ModelSpec<MlpConfig> build_spec() {
  ModelSpec<MlpConfig> s;
  s.kind = ModelKind{"mlp", mlp_dims_problem, {"relu", "gelu"}};
  s.flags = {{"layers", "the GPT's shape is --n-layer, --n-head, --n-embd"},
             {"activation", "the GPT's is GPT-2's tanh GELU"}};
  s.parameters = parameters;
  s.dims = dims;
  s.activation_name = activation_name;
  s.summary = summary;
  s.shape_text = shape_text;
  s.flops_per_sample = flops_per_sample;
  s.tokens_per_sample = no_tokens;
  s.input_width = input_width;
  s.output_width = output_width;
  s.check_data = check_mlp_matches_data;
  s.make = make;
  return s;
}

}  // namespace

const ModelSpec<MlpConfig>& mlp_spec() {
  static const ModelSpec<MlpConfig> spec = build_spec();
  return spec;
}

}  // namespace ddp
