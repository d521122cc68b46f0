// mlp_block.h: nanoGPT's MLP: c_fc (C -> 4C) with GPT-2's tanh GELU in its
// GEMM's epilogue, then c_proj (4C -> C):
//   h = gelu_tanh(x W_fc^T + b)    (the GELU's input kept for backward)
//   out = h W_proj^T + b
// Backward: c_proj's input gradient GEMM applies gelu' in its epilogue, so
// no element-wise pass runs between the GEMMs.
#pragma once

#include <string>

#include "kernels/backend.h"
#include "kernels/buffer.h"
#include "trainer/models/layers/linear_layer.h"
#include "trainer/models/layers/tensor_range.h"
#include "trainer/params/parameter_registry.h"
#include "trainer/params/tensor_table.h"

namespace ddp {

class MlpBlock {
 public:
  MlpBlock(Backend& backend, int channels, size_t max_rows);

  // `<prefix>c_fc` and `<prefix>c_proj` (nn.Linear tensors), adjacent in the registry.
  void bind(const ParameterRegistry& registry, const std::string& prefix);
  TensorRange tensors() const { return tensors_; }

  // out [rows, C] from x [rows, C] (kept: c_fc's weight gradient reads it).
  void forward(const half16* x, int rows, const WeightTable& weights_fp16, half16* out);
  // From d_out [rows, C]: the weights' and biases' gradients written or
  // added (accumulate), dx [rows, C] written; d_hidden [rows, 4C] is scratch.
  void backward(const half16* d_out, int rows, const WeightTable& weights_fp16, const GradTable& grads_fp16,
                bool accumulate, half16* d_hidden, half16* dx) const;

 private:
  Backend& backend_;
  LinearLayer c_fc_;
  LinearLayer c_proj_;
  TensorRange tensors_;
  const half16* input_ = nullptr;  // x of the last forward
  Buffer<half16> fc_pre_;          // [rows, 4C]: the GELU's input
  Buffer<half16> fc_out_;          // [rows, 4C]: h, c_proj's input
};

}  // namespace ddp
