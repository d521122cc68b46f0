// mlp_block.cpp
#include "trainer/models/layers/mlp_block.h"

#include "kernels/error.h"

namespace ddp {

MlpActivations::MlpActivations(Backend& backend, int channels, size_t max_rows)
    : fc_pre(backend, 4 * max_rows * channels), fc_out(backend, 4 * max_rows * channels) {}

MlpBlock::MlpBlock(Backend& backend, int channels, size_t max_rows, MlpActivations* shared)
    : backend_(backend), c_fc_(channels, 4 * channels), c_proj_(4 * channels, channels) {
  if (shared == nullptr) owned_ = std::make_unique<MlpActivations>(backend, channels, max_rows);
  kept_ = shared != nullptr ? shared : owned_.get();
  DDP_REQUIRE(kept_->fc_pre.count() >= 4 * max_rows * channels, "MlpBlock: the shared buffers are too small");
}

void MlpBlock::bind(const ParameterRegistry& registry, const std::string& prefix) {
  c_fc_.bind(registry, prefix + "c_fc");
  c_proj_.bind(registry, prefix + "c_proj");
  tensors_ = joined(c_proj_.tensors(), c_fc_.tensors());
}

void MlpBlock::forward(const lowp16* x, int rows, const WeightTable& weights_lowp, lowp16* out) {
  recompute_hidden(x, rows, weights_lowp);
  c_proj_.forward(backend_, kept_->fc_out.data(), rows, weights_lowp, out, Activation::None, nullptr);
}

void MlpBlock::recompute_hidden(const lowp16* x, int rows, const WeightTable& weights_lowp) {
  input_ = x;
  c_fc_.forward(backend_, x, rows, weights_lowp, kept_->fc_out.data(), Activation::GeluTanh, kept_->fc_pre.data());
}

void MlpBlock::backward(const lowp16* d_out, int rows, const WeightTable& weights_lowp, const GradTable& grads_lowp,
                        bool accumulate, lowp16* d_hidden, lowp16* dx) const {
  DDP_REQUIRE(input_ != nullptr, "MlpBlock::backward before forward");
  c_proj_.backward_weights(backend_, d_out, kept_->fc_out.data(), rows, grads_lowp, accumulate);
  c_proj_.backward_input(backend_, d_out, rows, weights_lowp, d_hidden, Activation::GeluTanh, kept_->fc_pre.data());
  c_fc_.backward_weights(backend_, d_hidden, input_, rows, grads_lowp, accumulate);
  c_fc_.backward_input(backend_, d_hidden, rows, weights_lowp, dx, Activation::None, nullptr);
}

}  // namespace ddp
