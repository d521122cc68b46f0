// layer_norm.cpp
#include "trainer/models/layers/layer_norm.h"

#include "kernels/error.h"
#include "kernels/transformer_math.h"

namespace ddp {

LayerNormActivations::LayerNormActivations(Backend& backend, int channels, size_t max_rows)
    : out(backend, max_rows * channels), mean(backend, max_rows), rstd(backend, max_rows) {}

LayerNorm::LayerNorm(Backend& backend, int channels, size_t max_rows, LayerNormActivations* shared)
    : backend_(backend), channels_(channels) {
  if (shared == nullptr) owned_ = std::make_unique<LayerNormActivations>(backend, channels, max_rows);
  kept_ = shared != nullptr ? shared : owned_.get();
  DDP_REQUIRE(kept_->out.count() >= max_rows * channels, "LayerNorm: the shared buffers are too small");
}

void LayerNorm::bind(const ParameterRegistry& registry, const std::string& prefix) {
  weight_tensor_ = registry.find(prefix + ".weight");
  DDP_REQUIRE(weight_tensor_ + 1 < registry.size() && registry[weight_tensor_ + 1].name == prefix + ".bias",
              "LayerNorm: its weight and bias are consecutive");
}

void LayerNorm::forward(const lowp16* x, int rows, const WeightTable& weights_lowp) {
  backend_.layernorm_forward_lowp(x, weights_lowp.at(weight_tensor_), weights_lowp.at(weight_tensor_ + 1), rows,
                                  channels_, kLayerNormEps, kept_->out.data(), kept_->mean.data(), kept_->rstd.data());
}

void LayerNorm::backward(const lowp16* dy, const lowp16* x, int rows, const WeightTable& weights_lowp,
                         const GradTable& grads_lowp, bool accumulate, lowp16* d_residual, bool add_to_residual) const {
  backend_.layernorm_backward_lowp(dy, x, weights_lowp.at(weight_tensor_), kept_->mean.data(), kept_->rstd.data(), rows,
                                   channels_, d_residual, add_to_residual, grads_lowp.at(weight_tensor_),
                                   grads_lowp.at(weight_tensor_ + 1), accumulate);
}

}  // namespace ddp
