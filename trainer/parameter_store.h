// parameter_store.h: the flat parameter buffers every other part works on.
//
// All parameters of the model live in one layout in reverse layer order
// (the order backward produces gradients): [W_{L-1}, b_{L-1}, ..., W_0, b_0].
// Every buffer below shares it, so the optimizer, the unscale/check pass, the
// all-reduce buckets, checkpoints and .npy export are single passes with one
// index. Weights are PyTorch nn.Linear layout: W_i [out_i, in_i], b_i [out_i].
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/buffer.h"

namespace ddp {

struct LinearSlices {
  int in_features = 0;
  int out_features = 0;
  size_t weight_offset = 0;  // elements into the flat buffers; [out, in]
  size_t bias_offset = 0;    // [out]
};

struct ParameterLayout {
  std::vector<LinearSlices> layers;  // forward order: layers[0] is the input layer
  size_t total_count = 0;

  static ParameterLayout for_mlp(const std::vector<int64_t>& widths);
};

class ParameterStore {
 public:
  ParameterStore(Backend& backend, const ParameterLayout& layout);

  const ParameterLayout& layout() const { return layout_; }
  size_t count() const { return layout_.total_count; }

  Buffer<float> master_weights_fp32;  // (P) the weights SGD updates
  Buffer<half16> weights_fp16;        // (P) fp16(master), what forward/backward read
  Buffer<float> momentum_fp32;        // (P) SGD momentum
  Buffer<half16> grads_fp16;          // (P) loss-scaled gradients, all-reduced in FP16
  Buffer<float> grads_fp32;           // (P) unscaled gradients the optimizer reads

  // Host <-> store: masters (and the FP16 copy re-cast from them).
  void set_master_weights(const std::vector<float>& host);
  std::vector<float> master_weights() const { return master_weights_fp32.download(); }

 private:
  ParameterLayout layout_;
};

// PyTorch nn.Linear initialisation (weight and bias uniform in
// +-1/sqrt(fan_in)), deterministic from `seed`, in the flat layout.
std::vector<float> init_linear_parameters(const ParameterLayout& layout, uint64_t seed);

}  // namespace ddp
