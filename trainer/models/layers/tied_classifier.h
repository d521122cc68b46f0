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
// Chunked, logits dropped (--classifier-logits drop, Liger's fused linear
// cross-entropy; classifier_logits.h): training also runs each chunk's
// backward in forward, dx's rows into an FP16 [R, C] buffer and d_wte's
// share into an FP32 [V, C] sum (gemm_lowp_to_fp32), so one chunk of
// logits is all there is of [R, V]; backward rounds the sum into d_wte
// (once, or added to what it holds) and hands dx over. No GEMM more than
// Keep's. The loss and dx are Keep's bits; d_wte sums the same FP32
// products by chunks, so its last FP16 bit may differ.
#pragma once

#include <cstddef>
#include <functional>

#include "kernels/backend.h"
#include "kernels/buffer.h"
#include "trainer/models/layers/classifier_logits.h"
#include "trainer/models/model.h"
#include "trainer/params/tensor_table.h"

namespace ddp {

// The head's bytes at R rows (chunk_rows 0: unchunked), with the FP32
// widening where the backend does it: what the allocation tally shows.
struct ClassifierBytes {
  double lowp_buffers = 0;   // the logits (dropped: one chunk's), unchunked their gradient, dropped dx [R, C]
  double fp32_widening = 0;  // the CPU's widened GEMM operands of [rows, V] shape (0 on CUDA)
  double row_losses = 0;     // chunked: the per-row losses (FP32 [R])
  double fp32_sums = 0;      // dropped: d_wte's FP32 sum [V, C]
  double total() const { return lowp_buffers + fp32_widening + row_losses + fp32_sums; }
};
ClassifierBytes classifier_bytes(size_t rows, int vocab, int channels, int chunk_rows, bool widens_fp32,
                                 ClassifierLogits logits = ClassifierLogits::Keep);
// The most rows any chunk of a batch of at most max_rows rows holds: the
// dropped head's logits buffer is this many rows of V.
int classifier_chunk_capacity(size_t max_rows, int vocab, int channels, int chunk_rows);

class TiedClassifier {
 public:
  // chunk_rows: 0 (unchunked) or the rows per chunk; logits Drop needs chunks.
  TiedClassifier(Backend& backend, int channels, int vocab, int real_vocab, size_t max_rows, int chunk_rows,
                 ClassifierLogits logits = ClassifierLogits::Keep);

  void bind(size_t wte_tensor) { wte_ = wte_tensor; }
  bool chunked() const { return chunk_rows_ > 0; }
  bool drops_logits() const { return logits_kept_ == ClassifierLogits::Drop; }

  // The logits of x [rows, C]. Dropped: into an [R, V] buffer made on the
  // first call (for generation without the KV cache), which training never
  // makes and buffer_bytes() leaves out.
  ModelOutput forward(const lowp16* x, int rows, const WeightTable& weights_lowp);
  // The same logits a chunk of rows at a time (unchunked: all at once),
  // handed to `each` in row order: what the evaluator reads, so the dropped
  // head makes no [R, V] buffer there either.
  void forward_rows(const lowp16* x, int rows, const WeightTable& weights_lowp,
                    const std::function<void(const ModelOutput& part, int first_row)>& each);
  // Chunked only: the logits, the mean loss against labels [rows] into
  // *loss_mean and its gradient times `scale` over the logits; dropped, also
  // dx and d_wte's FP32 sum from each chunk's gradient.
  void forward_with_loss(const lowp16* x, int rows, const WeightTable& weights_lowp, const int32_t* labels,
                         ScalarArg scale, float* loss_mean);
  // The loss gradient's place: the logits themselves when chunked. The
  // dropped head keeps none (training calls forward_with_loss): throws.
  lowp16* output_grad();
  // What its buffers hold (classifier_bytes less fp32_widening).
  size_t buffer_bytes() const {
    return logits_.size_bytes() + output_grad_.size_bytes() + row_loss_.size_bytes() + dx_.size_bytes() +
           d_wte_sum_fp32_.size_bytes();
  }
  // From output_grad() and the forward's x: dx [rows, C] written, d_wte
  // written or added (accumulate). Dropped: from what forward_with_loss
  // left (x and the weights are not read).
  void backward(const lowp16* x, int rows, const WeightTable& weights_lowp, const GradTable& grads_lowp,
                bool accumulate, lowp16* dx) const;

 private:
  Backend& backend_;
  int channels_;
  int vocab_;
  int real_vocab_;
  int chunk_rows_;
  ClassifierLogits logits_kept_;
  size_t wte_ = 0;
  Buffer<lowp16> logits_;         // [R, V]; dropped: [classifier_chunk_capacity, V]
  Buffer<lowp16> output_grad_;    // [R, V], unchunked only
  Buffer<float> row_loss_;        // [R], chunked only
  Buffer<lowp16> dx_;             // [R, C], dropped only
  Buffer<float> d_wte_sum_fp32_;  // [V, C], dropped only
  Buffer<lowp16> full_logits_;    // [R, V], dropped: made by the first forward()
  size_t max_rows_;
};

}  // namespace ddp
