// backend.h: the numerics interface the model and trainer call. Two
// implementations: CpuBackend (always built; the reference) and CudaBackend.
//
// All pointers passed to a Backend are that backend's memory (device memory
// for CUDA). Operations are ordered on the backend's compute stream and may
// return before they finish; copy_to_host and synchronize wait. Shapes are
// row-major. Counts are element counts; byte counts say `_bytes`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "kernels/adamw_math.h"
#include "kernels/elementwise_math.h"
#include "kernels/error.h"
#include "kernels/half.h"
#include "kernels/stream_marks.h"
#include "kernels/step_status.h"
#include "kernels/transformer_math.h"
#include "kernels/upload_slots.h"

namespace ddp {

enum class DeviceKind { Cpu, Cuda };
enum class Transpose { No, Yes };

// C[m,n] = epilogue(alpha * op(A)[m,k] * op(B)[k,n] + beta * C), row-major,
// FP16 operands and result, FP32 accumulation, one rounding to FP16 at the
// end. lda/ldb/ldc are row strides of the stored matrices (stored A is m x k
// when trans_a == No, k x m when Yes).
//
// The epilogue works on the FP32 value v of each element before that one
// rounding, in this order (gemm_epilogue.h has it as code, shared by
// the CPU loops and the CUDA kernels):
//   v += bias[j]                         (bias; v already holds beta * C)
//   pre_activation[i,j] = fp16(v)        (pre_activation)
//   v = act'(z[i,j]) * v, z = dact_input (dact)
//   v = act(v)                           (act)
//   C[i,j] = fp16(v)
// and, independent of C, bias_grad[i] = fp16(sum_p op(A)[i,p]) over k in
// FP32: in the weight-gradient GEMM dW = dY^T X, op(A) = dY^T and that is
// db = sum_rows(dY), fused into the pass that already reads dY. Which of
// these each backend fuses into the GEMM itself, and which it runs as a
// kernel of its own with the same semantics: cpu_gemm.h, cuda_gemm.h.
//
// Rounding consequences against the unfused sequence (GEMM, then the
// element-wise passes below): ReLU commutes with round-to-nearest-even
// (rounding is monotone and keeps the sign; relu'(z) is 0 or 1), so fused
// ReLU and its gradient give the same bits as the separate passes. GELU
// rounds once instead of twice: at least as accurate, not bitwise equal.
// The bias gradient sums the same FP16 values (op(A)) as bias_grad_fp16.
struct GemmFp16 {
  Transpose trans_a = Transpose::No;
  Transpose trans_b = Transpose::No;
  int m = 0, n = 0, k = 0;
  float alpha = 1.0f;
  float beta = 0.0f;
  const half16* a = nullptr;
  int lda = 0;
  const half16* b = nullptr;
  int ldb = 0;
  half16* c = nullptr;
  int ldc = 0;
  // Optional [n] bias added in FP32 before the rounding (a cuBLASLt epilogue
  // on CUDA), after beta * C: with beta 1 and C the residual stream, x +=
  // y W^T + b is one GEMM with one rounding (the GPT's output projections)
  // instead of a GEMM and add_fp16. Any beta.
  const half16* bias = nullptr;
  // Forward activation applied in FP32 before the rounding. Only with
  // beta == 0 and dact == None.
  Activation act = Activation::None;
  // Optional [m, ld_pre_activation] output: the FP16 value before act (the
  // activation's input, which GELU's gradient needs). Only with beta == 0.
  half16* pre_activation = nullptr;
  int ld_pre_activation = 0;
  // Backward: multiply by act'(z) before the rounding, z read from
  // dact_input [m, ld_dact_input] (FP16): the activation's input Z, or, for
  // ReLU, its output Y = fp16(relu(Z)) (Y > 0 exactly when fp16(Z) > 0, so
  // relu' is the same and no Z need be kept). Only with beta == 0. Neither
  // dact_input nor pre_activation may overlap C (CUDA may write C first).
  Activation dact = Activation::None;
  const half16* dact_input = nullptr;
  int ld_dact_input = 0;
  // Optional [m] bias gradient of op(A), see above; with
  // bias_grad_accumulate it is added to what bias_grad holds (before the one
  // rounding), as bias_grad_fp16 does. Any beta.
  half16* bias_grad = nullptr;
  bool bias_grad_accumulate = false;
};

// The flat buffers one AdamW step reads and writes (all in the registry's
// layout, indexed alike), for Backend::adamw_update.
struct AdamWBuffers {
  // The unscaled FP32 gradients, or null: read grads_fp16 and unscale each
  // on the fly (unscale_element), the fused step's second pass.
  const float* grads_fp32 = nullptr;
  const half16* grads_fp16 = nullptr;
  float* master_fp32 = nullptr;
  float* exp_avg_fp32 = nullptr;     // m
  float* exp_avg_sq_fp32 = nullptr;  // v
  half16* weights_fp16 = nullptr;    // re-cast from the master after the step
  // Per element: non-zero where weight decay applies (the tensor's registry
  // flag). Null: it applies everywhere.
  const uint8_t* decay_mask = nullptr;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual DeviceKind kind() const = 0;
  virtual std::string description() const = 0;

  // ---- memory -------------------------------------------------------------
  // The bytes Buffers (buffer.h: the trainer's and its models' device
  // memory) hold now and at most so far: the trainer's own high-water mark,
  // which the memory report and --bench quote. Not the device's or the
  // host's (a CUDA context, cuBLAS, NCCL's staging and MPI's buffers are
  // allocated outside Buffers).
  struct AllocationTally {
    size_t in_use_bytes = 0;
    size_t peak_bytes = 0;
  };
  AllocationTally allocations() const { return tally_; }
  void count_allocation(size_t size_bytes) {
    tally_.in_use_bytes += size_bytes;
    if (tally_.in_use_bytes > tally_.peak_bytes) tally_.peak_bytes = tally_.in_use_bytes;
  }
  void count_release(size_t size_bytes) noexcept { tally_.in_use_bytes -= size_bytes; }

  virtual void* allocate_bytes(size_t size_bytes) = 0;
  virtual void free_bytes(void* ptr) noexcept = 0;
  virtual void copy_to_device(void* dst, const void* src_host, size_t size_bytes) = 0;
  // Waits for all queued work before copying.
  virtual void copy_to_host(void* dst_host, const void* src, size_t size_bytes) = 0;
  virtual void copy_on_device(void* dst, const void* src, size_t size_bytes) = 0;
  virtual void fill_zero(void* dst, size_t size_bytes) = 0;
  virtual void synchronize() = 0;
  // Two fixed slots of slot_bytes each for copying batches to the device one
  // ahead of the compute stream (upload_slots.h): pinned staging and a copy
  // stream on CUDA, plain synchronous copies on the CPU.
  virtual std::unique_ptr<UploadSlots> make_upload_slots(size_t slot_bytes) = 0;

  // ---- GEMM ---------------------------------------------------------------
  virtual void gemm_fp16(const GemmFp16& g) = 0;

  // ---- element-wise and reductions (FP32 math, RNE to FP16) ---------------
  // y[r,c] = fp16(y[r,c] + bias[c])                      y: [rows, cols]
  virtual void add_bias_fp16(half16* y, const half16* bias, int rows, int cols) = 0;
  // y = fp16(act(z)); z may equal y.
  virtual void activation_forward_fp16(Activation act, const half16* z, half16* y, size_t count) = 0;
  // dz = fp16(act'(z) * dy); dz may equal dy.
  virtual void activation_backward_fp16(Activation act, const half16* z, const half16* dy, half16* dz,
                                        size_t count) = 0;
  // db[c] = fp16(sum_r dy[r,c] (+ db[c] when accumulate)), FP32 sum.   dy: [rows, cols]
  virtual void bias_grad_fp16(const half16* dy, int rows, int cols, half16* db, bool accumulate) = 0;
  virtual void cast_fp32_to_fp16(const float* src, half16* dst, size_t count) = 0;
  virtual void cast_fp16_to_fp32(const half16* src, float* dst, size_t count) = 0;

  // ---- losses (FP32 from FP16 predictions) --------------------------------
  // *loss_mean = mean_r [logsumexp(logits[r,:]) - logits[r, labels[r]]];
  // *correct_count (if not null) = #rows whose argmax equals the label
  // (first maximum wins, as torch.argmax).
  virtual void softmax_xent_forward(const half16* logits, const int32_t* labels, int rows, int cols,
                                    float* loss_mean, int32_t* correct_count) = 0;
  // dlogits = fp16(loss_scale * (softmax(logits) - onehot(labels)) / rows)
  // (loss_scale: a value, or ScalarArg::at a float in this backend's memory)
  virtual void softmax_xent_backward(const half16* logits, const int32_t* labels, int rows, int cols,
                                     ScalarArg loss_scale, half16* dlogits) = 0;
  // *loss_mean = mean over rows*cols of (pred - target)^2 (torch MSELoss 'mean').
  virtual void mse_forward(const half16* pred, const float* target, int rows, int cols, float* loss_mean) = 0;
  // dpred = fp16(loss_scale * 2 * (pred - target) / (rows * cols))
  virtual void mse_backward(const half16* pred, const float* target, int rows, int cols, ScalarArg loss_scale,
                            half16* dpred) = 0;

  // Cross-entropy over a padded vocabulary (the GPT's logits [rows, cols],
  // cols = the vocabulary padded to a multiple of 64 for the GEMMs, as
  // llm.c): only the first real_cols columns are classes. Padded columns
  // never win the argmax and get no probability: the loss and the
  // gradient are those of the real_cols-wide rows, and dlogits is exactly 0
  // in the padded columns. real_cols == cols is softmax_xent_forward /
  // _backward above, bit for bit. A label outside [0, real_cols) makes its
  // row's loss (hence the mean) NaN and its gradient row NaN.
  virtual void softmax_xent_forward_padded(const half16* logits, const int32_t* labels, int rows, int cols,
                                           int real_cols, float* loss_mean, int32_t* correct_count) = 0;
  virtual void softmax_xent_backward_padded(const half16* logits, const int32_t* labels, int rows, int cols,
                                            int real_cols, ScalarArg loss_scale, half16* dlogits) = 0;

  // ---- transformer (GPT) operations ------------------------------------------
  // FP16 storage, FP32 arithmetic inside each operation, one rounding to
  // FP16 per output; every reduction runs in an order fixed by the shapes
  // (no atomics), so each backend gives the same bits run to run. The
  // per-element math is transformer_math.h. B = batch, T = seq_len,
  // C = channels, nh = heads, hs = head_size (C = nh * hs).
  //
  // out[b*T + t, c] = fp16(wte[tokens[b*T + t], c] + wpe[t, c]) (FP32 add).
  // tokens [B*T] int32, wte [vocab, C], wpe [>= T, C], out [B*T, C]. A token
  // outside [0, vocab) gives a NaN row (a kernel cannot throw).
  virtual void embedding_forward_fp16(const int32_t* tokens, const half16* wte, const half16* wpe, int batch,
                                      int seq_len, int channels, int vocab, half16* out) = 0;
  // d_wte[v, c] = fp16(sum over rows r with tokens[r] == v of dout[r, c]),
  // the FP32 sum in increasing r; rows of tokens that do not occur become 0.
  // d_wpe[t, c] = fp16(sum_b dout[b*T + t, c]), in increasing b. With
  // accumulate, each sum starts from the FP16 value already there (FP32
  // add, then the one rounding): the GPT's tied LM head writes its weight
  // gradient into d_wte with its GEMM first, and this adds the embedding's
  // part, so the lm_head part is rounded twice (by the GEMM, then here) and
  // the embedding part once. Tokens outside [0, vocab) add nothing.
  virtual void embedding_backward_fp16(const int32_t* tokens, const half16* dout, int batch, int seq_len,
                                       int channels, int vocab, half16* d_wte, half16* d_wpe, bool accumulate) = 0;
  // y[r, :] = fp16((x[r, :] - mean_r) * rstd_r * gamma + beta), mean_r and
  // the biased variance in FP32 over the row, rstd_r = 1/sqrt(var + eps)
  // (nn.LayerNorm). mean/rstd [rows] FP32 are kept for the backward.
  virtual void layernorm_forward_fp16(const half16* x, const half16* gamma, const half16* beta, int rows, int cols,
                                      float eps, half16* y, float* mean, float* rstd) = 0;
  // dx = fp16(LayerNorm's input gradient (transformer_math.h:
  // layernorm_dx) (+ dx when accumulate_dx: the residual stream's gradient
  // the block's output already put there)); dgamma[c] = fp16(sum_r dy xhat),
  // dbeta[c] = fp16(sum_r dy) (+ their FP16 values when accumulate_params),
  // FP32 column sums in an order fixed by rows.
  virtual void layernorm_backward_fp16(const half16* dy, const half16* x, const half16* gamma, const float* mean,
                                       const float* rstd, int rows, int cols, half16* dx, bool accumulate_dx,
                                       half16* dgamma, half16* dbeta, bool accumulate_params) = 0;
  // gemm_fp16 of g (no epilogue: bias, act, dact, pre_activation and
  // bias_grad must be unset) on batch_count matrix triples, the i-th at
  // a + i*stride_a, b + i*stride_b, c + i*stride_c (element strides): the
  // per-head products Q K^T and P V and their gradients.
  virtual void gemm_batched_fp16(const GemmFp16& g, int batch_count, int64_t stride_a, int64_t stride_b,
                                 int64_t stride_c) = 0;
  // probs[z, i, j] = fp16(softmax over j <= i of scale * scores[z, i, j]),
  // exactly 0 for j > i; scores, probs [batch_heads, T, T]; FP32 max, exp,
  // sum. probs may equal scores.
  virtual void causal_softmax_forward_fp16(const half16* scores, int batch_heads, int seq_len, float scale,
                                           half16* probs) = 0;
  // dscores = fp16(scale * p * (dp - sum_{j<=i} p dp)) for j <= i, exactly 0
  // for j > i (transformer_math.h: causal_softmax_grad), from the FP16
  // probabilities the forward wrote. dscores may equal dprobs.
  virtual void causal_softmax_backward_fp16(const half16* probs, const half16* dprobs, int batch_heads, int seq_len,
                                            float scale, half16* dscores) = 0;
  // y[i] = fp16(a[i] + b[i]) (FP32 add): the residual add; y may equal a or
  // b (y == a is the in-place accumulate x += f(x)).
  virtual void add_fp16(const half16* a, const half16* b, half16* y, size_t count) = 0;
  // Head split: heads[b, h, t, d] = rows[(b*T + t) * row_stride + h*hs + d],
  // rows viewed as [B, T, row_stride] of which the first nh*hs columns are
  // read (point at q, k or v inside qkv [B, T, 3C] with row_stride 3C); heads
  // [B, nh, T, hs]. Also the backward of heads_to_rows_fp16. A copy: exact.
  virtual void rows_to_heads_fp16(const half16* rows, int row_stride, int batch, int seq_len, int heads,
                                  int head_size, half16* heads_out) = 0;
  // Head merge, the inverse: rows[(b*T + t) * row_stride + h*hs + d] =
  // heads[b, h, t, d]; columns of rows beyond nh*hs are not touched. The
  // attention output y [B, nh, T, hs] -> [B, T, C], and the backward of the
  // split (dq, dk, dv into dqkv).
  virtual void heads_to_rows_fp16(const half16* heads_in, int batch, int seq_len, int heads, int head_size,
                                  half16* rows, int row_stride) = 0;

  // ---- optimizer -----------------------------------------------------------
  // grads_fp32 = float(grads_fp16) * inv_scale (unscale_element); if any
  // result is Inf/NaN, sets *nonfinite_flag = 1 (never clears it: the caller
  // zeroes it per step). grads_fp32 may be null: the check alone, a pass
  // that reads only the FP16 gradients (the fused step's first pass).
  virtual void unscale_fp16_to_fp32(const half16* grads_fp16, float* grads_fp32, size_t count, ScalarArg inv_scale,
                                    int32_t* nonfinite_flag) = 0;
  // *norm = sqrt(sum x^2), FP32 accumulation at least (Inf/NaN propagate).
  virtual void l2_norm_fp32(const float* x, size_t count, float* norm) = 0;
  // SGD step (elementwise_math.h: sgd_update_element) on master weights and
  // momentum, then weights_fp16 = fp16(master). Does nothing at all when
  // *skip_flag != 0 (skip_flag may be null: never skip). params.lr_ptr and
  // params.momentum_initialized, where set, are read when the step runs.
  virtual void sgd_update(const SgdParams& params, const float* grads_fp32, float* master_fp32,
                          float* momentum_fp32, half16* weights_fp16, size_t count, const int32_t* skip_flag) = 0;
  // The same step reading the FP16 gradients and unscaling each on the fly
  // (unscale_element), bitwise equal to unscale_fp16_to_fp32 then
  // sgd_update: the fused step's second pass, with no FP32 gradient buffer
  // written or read.
  virtual void sgd_update_fp16_grads(const SgdParams& params, const half16* grads_fp16, ScalarArg inv_scale,
                                     float* master_fp32, float* momentum_fp32, half16* weights_fp16, size_t count,
                                     const int32_t* skip_flag) = 0;

  // AdamW step (adamw_math.h: adamw_update_element) on the elements
  // [offset, offset + count) of every buffer of `b` (the pointers are the
  // buffers' starts; a rank's shard is such a range), then weights_fp16 =
  // fp16(master) there. Nothing outside the range is read or written. Does
  // nothing at all when *skip_flag != 0 (skip_flag may be null: never skip).
  // params.lr_ptr and params.steps_taken, where set, are read when the step
  // runs. With b.grads_fp32 null the FP16 gradients are unscaled by
  // inv_scale on the fly: bitwise equal to unscale_fp16_to_fp32 and then
  // this with the FP32 gradients.
  virtual void adamw_update(const AdamWParams& params, const AdamWBuffers& b, ScalarArg inv_scale, size_t offset,
                            size_t count, const int32_t* skip_flag) = 0;

  // ---- device-resident step state (step_status.h) ---------------------------
  // Queued like any kernel: neither waits for the device. status points to
  // one StepStatus in this backend's memory.
  virtual void step_status_prepare(StepStatus* status, double backward_divisor, double unscale_divisor,
                                   float lr) = 0;
  virtual void step_status_finish(const LossScaleRule& rule, StepStatus* status) = 0;

  // ---- step capture (CUDA graphs) ---------------------------------------------
  // Records the operations queued between begin_capture() and end_capture()
  // without running them, then replays the recording as often as asked
  // (CUDA: stream capture into a graph, one launch per replay). While
  // capturing nothing may wait for the device or hand over host data:
  // copy_to_device, copy_to_host and synchronize throw. A replay reads
  // memory as it is when it runs; arguments passed by value (shapes, a
  // ScalarArg value, SgdParams fields) are those of the capture, which is
  // why a captured step reads its scalars through the step state.
  virtual bool supports_capture() const { return false; }
  virtual void begin_capture() { throw Error(description() + " cannot capture a step"); }
  // Returns the recording's handle for replay().
  virtual int end_capture() { throw Error(description() + " cannot capture a step"); }
  virtual void replay(int /*recording*/) { throw Error(description() + " cannot replay a step"); }
  // Destroys every recording (their handles become invalid). A recording
  // that holds collectives keeps the communicator alive (NCCL waits for such
  // graphs when it is destroyed), so the owner of the recordings releases
  // them before the communicator goes. Waits for queued replays unless an
  // exception is unwinding (a replay may then wait for a peer that is gone;
  // the recordings are freed when their launches end).
  virtual void release_captures() noexcept {}

  // ---- tracing (--trace) ----------------------------------------------------
  // Marks on the compute stream (stream_marks.h); the default is the host's
  // clock, right for a backend whose calls return after their work.
  virtual std::unique_ptr<StreamMarks> make_stream_marks() { return std::make_unique<HostStreamMarks>(); }

 private:
  AllocationTally tally_;
};

}  // namespace ddp
