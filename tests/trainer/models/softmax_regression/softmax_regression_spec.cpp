// softmax_regression_spec.cpp: the test-only model as the table describes it.
#include "softmax_regression_spec.h"

#include "kernels/error.h"
#include "softmax_regression_model.h"
#include "trainer/config/model_table.h"

namespace ddp::test {
namespace {

// Widths IN,CLASSES: exactly two, both positive.
std::string dims_problem(const std::vector<int64_t>& dims, uint64_t& count) {
  if (dims.size() != 2) return "softmax regression has 2 widths (in, classes), not " + std::to_string(dims.size());
  if (dims[0] <= 0 || dims[1] <= 0) return "softmax regression widths must be positive";
  count = static_cast<uint64_t>(dims[0] * dims[1] + dims[1]);
  return "";
}

void require_two_widths(const MlpConfig& m) {
  uint64_t count = 0;
  const std::string problem = dims_problem(m.layer_widths, count);
  if (!problem.empty()) throw Error("--layers: " + problem);
}

ParameterRegistry parameters(const MlpConfig& m) {
  require_two_widths(m);
  return softmax_regression_parameters(m.layer_widths[0], m.layer_widths[1]);
}
std::vector<int64_t> dims(const MlpConfig& m) { return m.layer_widths; }
std::string activation_name(const MlpConfig&) { return "none"; }
std::string shape_text(const MlpConfig& m) { return mlp_widths_text(m.layer_widths); }
std::string summary(const MlpConfig& m) { return "softmax regression " + shape_text(m); }
// Forward 2*in*classes, the dW GEMM 2*in*classes; no input gradient.
double flops_per_sample(const MlpConfig& m) { return 4.0 * static_cast<double>(m.layer_widths[0]) * m.layer_widths[1]; }
int64_t no_tokens(const MlpConfig&) { return 0; }
int64_t input_width(const MlpConfig& m) { return m.layer_widths.front(); }
int64_t output_width(const MlpConfig& m) { return m.layer_widths.back(); }

void check_data(const MlpConfig& m, LossKind loss, const TrainTestData& data) {
  if (loss != LossKind::SoftmaxCrossEntropy) throw Error("--model softmax-regression: --loss must be xent");
  require_two_widths(m);
  check_mlp_matches_data(m, loss, data);
}

std::unique_ptr<Model> make(const MlpConfig& m, Backend& backend, int max_batch) {
  require_two_widths(m);
  return std::make_unique<SoftmaxRegressionModel>(backend, static_cast<int>(m.layer_widths[0]),
                                                  static_cast<int>(m.layer_widths[1]), max_batch);
}

ModelSpec<MlpConfig> build_spec() {
  ModelSpec<MlpConfig> s;
  s.kind = ModelKind{kSoftmaxRegression, dims_problem, {"none"}};
  s.parameters = parameters;
  s.dims = dims;
  s.activation_name = activation_name;
  s.summary = summary;
  s.shape_text = shape_text;
  s.flops_per_sample = flops_per_sample;
  s.tokens_per_sample = no_tokens;
  s.input_width = input_width;
  s.output_width = output_width;
  s.check_data = check_data;
  s.make = make;
  return s;
}

}  // namespace

const ModelSpec<MlpConfig>& softmax_regression_spec() {
  static const ModelSpec<MlpConfig> spec = build_spec();
  return spec;
}

void register_softmax_regression() {
  static const bool registered = [] {
    register_model(bind_model(softmax_regression_spec(), &TrainConfig::mlp));
    return true;
  }();
  (void)registered;
}

}  // namespace ddp::test
