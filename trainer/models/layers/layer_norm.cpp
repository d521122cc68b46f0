// layer_norm.cpp
#include "trainer/models/layers/layer_norm.h"

#include "kernels/error.h"
#include "kernels/ops/layernorm.h"
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
  LayerNormForward norm;
  norm.x = x;
  norm.gamma = weights_lowp.at(weight_tensor_);
  norm.beta = weights_lowp.at(weight_tensor_ + 1);
  norm.rows = rows;
  norm.cols = channels_;
  norm.eps = kLayerNormEps;
  norm.y = kept_->out.data();
  norm.mean = kept_->mean.data();
  norm.rstd = kept_->rstd.data();
  layernorm_forward_lowp(backend_, norm);
}

void LayerNorm::backward(const lowp16* dy, const lowp16* x, int rows, const WeightTable& weights_lowp,
                         const GradTable& grads_lowp, bool accumulate, lowp16* d_residual, bool add_to_residual) const {
  LayerNormBackward norm;
  norm.dy = dy;
  norm.x = x;
  norm.gamma = weights_lowp.at(weight_tensor_);
  norm.mean = kept_->mean.data();
  norm.rstd = kept_->rstd.data();
  norm.rows = rows;
  norm.cols = channels_;
  norm.dx = d_residual;
  norm.accumulate_dx = add_to_residual;
  norm.dgamma = grads_lowp.at(weight_tensor_);
  norm.dbeta = grads_lowp.at(weight_tensor_ + 1);
  norm.accumulate_params = accumulate;
  layernorm_backward_lowp(backend_, norm);
}

}  // namespace ddp
