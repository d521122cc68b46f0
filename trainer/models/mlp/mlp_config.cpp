// mlp_config.cpp
#include "trainer/models/mlp/mlp_config.h"

#include <algorithm>

#include "kernels/error.h"
#include "trainer/data/data_source.h"
#include "trainer/io/int_list.h"

namespace ddp {
namespace {

// The first label of `data` that a model with `outputs` outputs cannot
// produce, named by file and sample or line.
void require_labels_below(const Dataset& data, int64_t outputs, const std::string& layers, int classes) {
  for (size_t i = 0; i < data.labels.size(); ++i) {
    if (data.labels[i] < outputs) continue;
    throw Error(label_place(data, i) + ": label " + std::to_string(data.labels[i]) + " is not below the output width " +
                std::to_string(outputs) + " of --layers " + layers + " (the data has " + std::to_string(classes) +
                " classes)");
  }
}

}  // namespace

void set_mlp_options(MlpConfig& mlp, const std::string& layers, const std::string& activation) {
  if (!parse_int_list(layers, 1, 1 << 20, mlp.layer_widths))
    throw Error("--layers: '" + layers + "' is not a comma-separated list of positive widths");
  if (mlp.layer_widths.size() < 2)
    throw Error("--layers: '" + layers + "' needs at least an input and an output width");
  if (activation == "relu")
    mlp.activation = Activation::Relu;
  else if (activation == "gelu")
    mlp.activation = Activation::Gelu;
  else
    throw Error("--activation: '" + activation + "' is not one of relu, gelu");
  mlp.activation_name = activation;
}

std::string mlp_tensor_prefix(size_t linear_index) { return std::to_string(2 * linear_index); }

ParameterRegistry mlp_parameters(const std::vector<int64_t>& widths) {
  DDP_REQUIRE(widths.size() >= 2, "an MLP needs at least an input and an output width");
  ParameterRegistry registry;
  const size_t n = widths.size() - 1;
  for (size_t r = 0; r < n; ++r) {  // last layer first: backward's order
    const size_t i = n - 1 - r;
    register_linear_parameters(registry, mlp_tensor_prefix(i), widths[i], widths[i + 1], static_cast<int>(2 * i),
                               "layer" + std::to_string(i));
  }
  return registry;
}

double mlp_flops_per_sample(const std::vector<int64_t>& widths) {
  double flops = 0.0;
  for (size_t i = 0; i + 1 < widths.size(); ++i) flops += 6.0 * static_cast<double>(widths[i]) * widths[i + 1];
  if (widths.size() >= 2) flops -= 2.0 * static_cast<double>(widths[0]) * widths[1];
  return flops;
}

std::string mlp_widths_text(const std::vector<int64_t>& widths, const char* separator) {
  std::string text;
  for (size_t i = 0; i < widths.size(); ++i) text += (i ? separator : "") + std::to_string(widths[i]);
  return text;
}

std::string mlp_dims_problem(const std::vector<int64_t>& widths, uint64_t& count) {
  // An MLP has an input and an output width at least (--layers insists).
  if (widths.size() < 2)
    return "layer widths list " + std::to_string(widths.size()) +
           " value(s) (a model has at least an input and an output width)";
  // A width is a matrix dimension; --layers accepts only positive ones.
  for (size_t i = 0; i < widths.size(); ++i)
    if (widths[i] <= 0)
      return "layer width " + std::to_string(i) + " (of " + std::to_string(widths.size()) + ") is " +
             std::to_string(widths[i]) + " (must be > 0)";
  count = 0;
  for (size_t i = 0; i + 1 < widths.size(); ++i) {  // per Linear: weight [out, in] and bias [out]
    const auto in = static_cast<uint64_t>(widths[i]), out = static_cast<uint64_t>(widths[i + 1]);
    uint64_t layer = 0;
    if (__builtin_mul_overflow(in, out, &layer) || __builtin_add_overflow(layer, out, &layer) ||
        __builtin_add_overflow(count, layer, &count))
      return "layer widths imply more than 2^64 parameters";
  }
  return "";
}

void check_mlp_matches_data(const MlpConfig& mlp, LossKind loss, const TrainTestData& data) {
  const auto& w = mlp.layer_widths;
  const std::string layers = mlp_widths_text(w, ",");
  if (data.train.is_token_data() || data.test.is_token_data())
    throw Error("the MLP reads feature vectors, and this data holds token ids (" + data.train.source + ")");
  if (static_cast<size_t>(w.front()) != data.train.features)
    throw Error("--layers " + layers + ": input width " + std::to_string(w.front()) + " does not match the data's " +
                std::to_string(data.train.features) + " features");
  if (loss == LossKind::SoftmaxCrossEntropy) {
    if (!data.train.is_classification())
      throw Error("--loss xent needs class labels, but the data has regression targets (use --loss mse)");
    const int classes = std::max(data.train.num_classes, data.test.num_classes);
    require_labels_below(data.train, w.back(), layers, classes);
    require_labels_below(data.test, w.back(), layers, classes);
  } else {
    if (data.train.is_classification())
      throw Error("--loss mse needs regression targets, but the data has class labels (use --loss xent)");
    if (static_cast<size_t>(w.back()) != data.train.target_dim)
      throw Error("--layers " + layers + ": output width " + std::to_string(w.back()) + " does not match the data's " +
                  std::to_string(data.train.target_dim) + " targets");
  }
}

}  // namespace ddp
