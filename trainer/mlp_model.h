// mlp_model.h: Linear layers with an activation between them, forward and
// backward in FP16 on a Backend, per the numerics contract:
//   forward   Z_i = X_i W_i^T + b_i (FP32 sums), X_{i+1} = act(Z_i)
//   backward  dZ_i = act'(Z_i) * dX_{i+1};  dW_i = dZ_i^T X_i;  db_i = sum_rows dZ_i;
//             dX_i = dZ_i W_i (not for the first layer)
// Each line is one GEMM with its epilogue (backend.h), on every backend:
// a hidden layer's forward GEMM applies bias and activation before its one
// rounding (GELU also writes Z, which its gradient needs); the dW GEMM sums
// db from the dZ it reads; the dX GEMM of layer i applies act'(Z_{i-1}) and
// so writes dZ_{i-1} directly. No element-wise pass runs between GEMMs.
// The model owns only activations; parameters and gradients are views into a
// ParameterStore's flat buffers.
#pragma once

#include <functional>
#include <vector>

#include "kernels/buffer.h"
#include "trainer/parameter_store.h"

namespace ddp {

class MlpModel {
 public:
  MlpModel(Backend& backend, const ParameterLayout& layout, Activation activation, int max_batch);

  int input_width() const { return layout_.layers.front().in_features; }
  int output_width() const { return layout_.layers.back().out_features; }
  int max_batch() const { return max_batch_; }

  // x: [rows, input_width] FP16. Returns the FP16 outputs [rows, output_width]
  // (valid until the next forward).
  const half16* forward(const half16* x, int rows, const half16* weights_fp16);

  // Scratch for the loss gradient [max_batch, output_width], read by backward.
  half16* output_grad() { return output_grad_.data(); }

  // Backward of the last forward from output_grad(). Writes (accumulate=false)
  // or adds to (accumulate=true) the gradients in grads_fp16.
  // on_layer_done(i), if given, runs once layer i's dW and db are written
  // (queued, on a device), from the last layer down: the all-reduce of a
  // finished bucket starts there, overlapping the layers below.
  void backward(int rows, const half16* weights_fp16, half16* grads_fp16, bool accumulate,
                const std::function<void(int layer)>& on_layer_done = nullptr);

 private:
  Backend& backend_;
  ParameterLayout layout_;
  Activation activation_;
  int max_batch_;
  const half16* input_ = nullptr;     // X_0 of the last forward
  // GELU's gradient needs Z; ReLU's is read from Y (backend.h, GemmFp16::dact_input).
  bool keeps_pre_activation() const { return activation_ == Activation::Gelu; }

  std::vector<Buffer<half16>> pre_activation_;  // Z_i [max_batch, out_i]: the logits, and hidden Z for GELU
  std::vector<Buffer<half16>> activation_out_;  // X_{i+1} = act(Z_i) [max_batch, out_i] (hidden layers)
  std::vector<Buffer<half16>> grad_scratch_;    // dZ_i of a hidden layer [max_batch, out_i]
  Buffer<half16> output_grad_;
};

}  // namespace ddp
