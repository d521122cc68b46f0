// mlp_block.cpp
#include "trainer/models/layers/mlp_block.h"

#include "kernels/error.h"

namespace ddp {

MlpBlock::MlpBlock(Backend& backend, int channels, size_t max_rows)
    : backend_(backend),
      c_fc_(channels, 4 * channels),
      c_proj_(4 * channels, channels),
      fc_pre_(backend, 4 * max_rows * channels),
      fc_out_(backend, 4 * max_rows * channels) {}

void MlpBlock::bind(const ParameterRegistry& registry, const std::string& prefix) {
  c_fc_.bind(registry, prefix + "c_fc");
  c_proj_.bind(registry, prefix + "c_proj");
  tensors_ = joined(c_proj_.tensors(), c_fc_.tensors());
}

void MlpBlock::forward(const half16* x, int rows, const WeightTable& weights_fp16, half16* out) {
  input_ = x;
  c_fc_.forward(backend_, x, rows, weights_fp16, fc_out_.data(), Activation::GeluTanh, fc_pre_.data());
  c_proj_.forward(backend_, fc_out_.data(), rows, weights_fp16, out, Activation::None, nullptr);
}

void MlpBlock::backward(const half16* d_out, int rows, const WeightTable& weights_fp16, const GradTable& grads_fp16,
                        bool accumulate, half16* d_hidden, half16* dx) const {
  DDP_REQUIRE(input_ != nullptr, "MlpBlock::backward before forward");
  c_proj_.backward_weights(backend_, d_out, fc_out_.data(), rows, grads_fp16, accumulate);
  c_proj_.backward_input(backend_, d_out, rows, weights_fp16, d_hidden, Activation::GeluTanh, fc_pre_.data());
  c_fc_.backward_weights(backend_, d_hidden, input_, rows, grads_fp16, accumulate);
  c_fc_.backward_input(backend_, d_hidden, rows, weights_fp16, dx, Activation::None, nullptr);
}

}  // namespace ddp
