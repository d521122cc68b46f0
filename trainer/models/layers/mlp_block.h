// mlp_block.h: nanoGPT's MLP: c_fc (C -> 4C) with GPT-2's tanh GELU in its
// GEMM's epilogue, then c_proj (4C -> C):
//   h = gelu_tanh(x W_fc^T + b)    (the GELU's input kept for backward)
//   out = h W_proj^T + b
// Backward: c_proj's input gradient GEMM applies gelu' in its epilogue, so
// no element-wise pass runs between the GEMMs. It reads fc_pre and h: kept
// in the MLP's own buffers (--recompute none) or in buffers every block's
// MLP shares (light, block), which recompute_hidden() refills before the
// backward. It re-runs the whole c_fc GEMM with its fused epilogue: GELU
// applied again to the rounded fc_pre differs from the epilogue's in about
// a third of the elements.
#pragma once

#include <memory>
#include <string>

#include "kernels/backend.h"
#include "kernels/buffer.h"
#include "trainer/models/layers/linear_layer.h"
#include "trainer/models/layers/tensor_range.h"
#include "trainer/params/parameter_registry.h"
#include "trainer/params/tensor_table.h"

namespace ddp {

// What the MLP's backward reads of its forward.
struct MlpActivations {
  MlpActivations(Backend& backend, int channels, size_t max_rows);
  size_t size_bytes() const { return fc_pre.size_bytes() + fc_out.size_bytes(); }
  Buffer<lowp16> fc_pre;  // [rows, 4C]: the GELU's input
  Buffer<lowp16> fc_out;  // [rows, 4C]: h, c_proj's input
};

class MlpBlock {
 public:
  // shared: where forward writes fc_pre and h (null: buffers of its own).
  MlpBlock(Backend& backend, int channels, size_t max_rows, MlpActivations* shared = nullptr);

  // `<prefix>c_fc` and `<prefix>c_proj` (nn.Linear tensors), adjacent in the registry.
  void bind(const ParameterRegistry& registry, const std::string& prefix);
  TensorRange tensors() const { return tensors_; }

  // out [rows, C] from x [rows, C] (x kept: c_fc's weight gradient reads it).
  void forward(const lowp16* x, int rows, const WeightTable& weights_lowp, lowp16* out);
  // Forward's c_fc alone, from the same x [rows, C] again: fc_pre and h as forward wrote them.
  void recompute_hidden(const lowp16* x, int rows, const WeightTable& weights_lowp);
  // From d_out [rows, C]: the weights' and biases' gradients written or
  // added (accumulate), dx [rows, C] written; d_hidden [rows, 4C] is scratch.
  void backward(const lowp16* d_out, int rows, const WeightTable& weights_lowp, const GradTable& grads_lowp,
                bool accumulate, lowp16* d_hidden, lowp16* dx) const;
  // The bytes of its own buffers (0 when shared).
  size_t owned_bytes() const { return owned_ ? owned_->size_bytes() : 0; }

 private:
  Backend& backend_;
  LinearLayer c_fc_;
  LinearLayer c_proj_;
  TensorRange tensors_;
  const lowp16* input_ = nullptr;          // x of the last forward
  std::unique_ptr<MlpActivations> owned_;  // null when shared
  MlpActivations* kept_ = nullptr;         // owned_ or the shared buffers
};

}  // namespace ddp
