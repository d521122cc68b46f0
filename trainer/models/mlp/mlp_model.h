// mlp_model.h: Linear layers with an activation between them (the MLP as
// PyTorch's nn.Sequential; mlp_config.h names its tensors), forward and
// backward in FP16 on a Backend, per the numerics contract:
//   forward   Z_i = X_i W_i^T + b_i (FP32 sums), X_{i+1} = act(Z_i)
//   backward  dZ_i = act'(Z_i) * dX_{i+1};  dW_i = dZ_i^T X_i;  db_i = sum_rows dZ_i;
//             dX_i = dZ_i W_i (not for the first layer)
// Each line is one GEMM with its epilogue (linear_layer.h): a hidden
// layer's forward GEMM applies bias and activation before its one rounding
// (GELU also writes Z, which its gradient needs); the dW GEMM sums db from
// the dZ it reads; the dX GEMM of layer i applies act'(Z_{i-1}) and so
// writes dZ_{i-1} directly. No element-wise pass runs between GEMMs.
// Layer i (for the hooks) is Linear i; its weight and bias gradients are
// final together, after its dW GEMM.
#pragma once

#include <vector>

#include "kernels/buffer.h"
#include "trainer/models/layers/linear_layer.h"
#include "trainer/models/mlp/mlp_config.h"
#include "trainer/models/model.h"

namespace ddp {

class MlpModel final : public Model {
 public:
  MlpModel(Backend& backend, const MlpConfig& config, int max_batch);

  const ParameterRegistry& parameters() const override { return registry_; }
  int max_batch() const override { return max_batch_; }
  int layer_count() const override { return static_cast<int>(layers_.size()); }
  // Layer i: Linear i's weight and bias.
  std::vector<size_t> layer_tensors(int layer) const override;
  int input_width() const { return layers_.front().in_features(); }
  int output_width() const { return layers_.back().out_features(); }

  // batch.features_lowp: [rows, input_width]. Outputs [rows, output_width].
  ModelOutput forward(const DeviceBatch& batch, const WeightTable& weights_lowp) override;
  lowp16* output_grad() override { return output_grad_.data(); }
  void backward(const WeightTable& weights_lowp, const GradTable& grads_lowp, bool accumulate,
                const GradientsReady& ready) override;
  // "layers": what forward keeps for backward, 2B (sum h + o) bytes, and
  // 2B sum h more with GELU (its Z); "gradients": the hidden dZ scratch and
  // the loss gradient, 2B (sum h + o). B max_batch, h the hidden widths, o
  // the output width, 2 bytes per FP16 element.
  ActivationKinds activation_kinds() const override;

 private:
  Backend& backend_;
  ParameterRegistry registry_;
  std::vector<LinearLayer> layers_;  // forward order
  Activation activation_;
  int max_batch_;
  const lowp16* input_ = nullptr;  // X_0 of the last forward
  int rows_ = 0;                   // of the last forward
  // GELU's gradient needs Z; ReLU's is read from Y (backend.h, GemmLowp::dact_input).
  bool keeps_pre_activation() const { return activation_ == Activation::Gelu; }

  std::vector<Buffer<lowp16>> pre_activation_;  // Z_i [max_batch, out_i]: the logits, and hidden Z for GELU
  std::vector<Buffer<lowp16>> activation_out_;  // X_{i+1} = act(Z_i) [max_batch, out_i] (hidden layers)
  std::vector<Buffer<lowp16>> grad_scratch_;    // dZ_i of a hidden layer [max_batch, out_i]
  Buffer<lowp16> output_grad_;
};

}  // namespace ddp
