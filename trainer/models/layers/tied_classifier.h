// tied_classifier.h: the GPT's LM head, tied to its token embedding wte
// [V, C], and in training its cross-entropy:
//   logits [R, V] = x [R, C] wte^T          (x: ln_f's output)
//   backward: dx = dlogits wte,  d_wte (+)= dlogits^T x
//
// Unchunked (chunk_rows 0): the logits and their gradient are two FP16
// [R, V] buffers, the loss is the shared loss head's (loss_head.h), and each
// head GEMM runs over all R rows at once (the CPU backend widens each of its
// [R, V] operands to FP32 first).
// Chunked (--classifier-chunk ROWS, llm.c's fused classifier): training
// computes the logits, their loss and its gradient chunk_rows rows at a time
// (backend.h: softmax_xent_fused_rows), the gradient written over the
// logits, so one FP16 [R, V] buffer exists; and every head GEMM runs by
// chunks (the logits and dx by rows, d_wte by vocabulary rows), so no
// operand larger than about chunk_rows x V is widened. A chunk's GEMM sums
// each output over the same k in the same order as the whole GEMM, so on
// the CPU the loss and every gradient are the unchunked ones' bits (chunks
// are rounded up to 48 rows, and hold at least 96 rows and 2^20
// multiply-adds: see tied_classifier.cpp).
#pragma once

#include <cstddef>

#include "kernels/backend.h"
#include "kernels/buffer.h"
#include "trainer/models/model.h"
#include "trainer/params/tensor_table.h"

namespace ddp {

// The head's bytes at R rows (chunk_rows 0: unchunked), with the FP32
// widening where the backend does it: what the allocation tally shows.
struct ClassifierBytes {
  double fp16_buffers = 0;  // the logits, and unchunked their gradient
  double fp32_widening = 0;  // the CPU's widened GEMM operands of [rows, V] shape (0 on CUDA)
  double row_losses = 0;    // chunked: the per-row losses (FP32 [R])
  double total() const { return fp16_buffers + fp32_widening + row_losses; }
};
ClassifierBytes classifier_bytes(size_t rows, int vocab, int channels, int chunk_rows, bool widens_fp32);

class TiedClassifier {
 public:
  // chunk_rows: 0 (unchunked) or the rows per chunk.
  TiedClassifier(Backend& backend, int channels, int vocab, int real_vocab, size_t max_rows, int chunk_rows);

  void bind(size_t wte_tensor) { wte_ = wte_tensor; }
  bool chunked() const { return chunk_rows_ > 0; }

  // The logits of x [rows, C].
  ModelOutput forward(const half16* x, int rows, const WeightTable& weights_fp16);
  // Chunked only: the logits, the mean loss against labels [rows] into
  // *loss_mean and its gradient times `scale` over the logits.
  void forward_with_loss(const half16* x, int rows, const WeightTable& weights_fp16, const int32_t* labels,
                         ScalarArg scale, float* loss_mean);
  // The loss gradient's place: the logits themselves when chunked.
  half16* output_grad() { return chunked() ? logits_.data() : output_grad_.data(); }
  // What its buffers hold (classifier_bytes' fp16_buffers + row_losses).
  size_t buffer_bytes() const { return logits_.size_bytes() + output_grad_.size_bytes() + row_loss_.size_bytes(); }
  // From output_grad() and the forward's x: dx [rows, C] written, d_wte
  // written or added (accumulate).
  void backward(const half16* x, int rows, const WeightTable& weights_fp16, const GradTable& grads_fp16,
                bool accumulate, half16* dx) const;

 private:
  Backend& backend_;
  int channels_;
  int vocab_;
  int real_vocab_;
  int chunk_rows_;
  size_t wte_ = 0;
  Buffer<half16> logits_;       // [R, V]
  Buffer<half16> output_grad_;  // [R, V], unchunked only
  Buffer<float> row_loss_;      // [R], chunked only
};

}  // namespace ddp
