// cpu_backend.cpp: reference implementation of the Backend interface.
// Element-wise math comes from elementwise_math.h (shared with CUDA) through
// the range loops of cpu_elementwise.h, split over the thread pool when the
// count is large; GEMM is cpu_gemm.h (FP16 -> FP32 widening + cblas_sgemm +
// one RNE rounding to FP16).
#include "kernels/cpu/cpu_backend.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

#include "kernels/cpu/cpu_adamw.h"
#include "kernels/cpu/cpu_elementwise.h"
#include "kernels/cpu/cpu_flash_attention.h"
#include "kernels/cpu/cpu_upload_slots.h"
#include "kernels/error.h"
#include "kernels/half_convert.h"
#include "kernels/optimizer_preconditions.h"

#if defined(DDP_HAVE_OPENBLAS)
extern "C" {
void openblas_set_num_threads(int);
int openblas_get_num_threads(void);
}
#endif

namespace ddp {

int set_blas_threads(int threads) {
#if defined(DDP_HAVE_OPENBLAS)
  if (threads > 0) openblas_set_num_threads(threads);
  return openblas_get_num_threads();
#else
  (void)threads;
  return 1;
#endif
}

namespace {
// Element-wise passes shorter than this run on the calling thread: a pass
// over 32K halves takes ~10 us, about what handing work to a worker costs.
constexpr size_t kMinParallelElements = size_t{1} << 15;
// Longer ones are cut into this many pieces per thread, taken in turn.
constexpr size_t kPiecesPerThread = 4;
// Piece boundaries: whole cache lines of floats.
constexpr size_t kGrain = 64;
}  // namespace

size_t cpu_pass_pieces(size_t elements, int threads) {
  return elements < kMinParallelElements ? 1 : static_cast<size_t>(threads) * kPiecesPerThread;
}

size_t CpuBackend::pieces(size_t elements) const { return cpu_pass_pieces(elements, threads_); }

CpuBackend::CpuBackend(int threads, Precision precision)
    : threads_(threads > 0 ? threads : std::max(set_blas_threads(0), 1)),
      precision_(precision),
      pool_(std::make_unique<CpuThreadPool>(threads_)) {}

std::string CpuBackend::description() const {
#if defined(DDP_HAVE_OPENBLAS)
  const char* blas = "OpenBLAS";
#else
  const char* blas = "CBLAS";
#endif
  return std::string("CPU (") + blas + ", " + std::to_string(threads_) + " thread" + (threads_ == 1 ? "" : "s") +
         (f16c_available() ? ", F16C" : "") + ", " + precision_name(precision_) + ")";
}

// ---- memory ---------------------------------------------------------------------
void* CpuBackend::allocate_bytes(size_t size_bytes) {
  // 64-byte alignment: full cache lines and aligned SIMD loads in BLAS.
  void* p = std::aligned_alloc(64, (size_bytes + 63) / 64 * 64);
  if (!p) throw Error("CpuBackend: out of host memory allocating " + std::to_string(size_bytes) + " bytes");
  return p;
}
void CpuBackend::free_bytes(void* ptr) noexcept { std::free(ptr); }
void CpuBackend::copy_to_device(void* dst, const void* src, size_t n) { std::memcpy(dst, src, n); }
void CpuBackend::copy_to_host(void* dst, const void* src, size_t n) { std::memcpy(dst, src, n); }
void CpuBackend::copy_on_device(void* dst, const void* src, size_t n) { std::memmove(dst, src, n); }
void CpuBackend::fill_zero(void* dst, size_t n) { std::memset(dst, 0, n); }
std::unique_ptr<UploadSlots> CpuBackend::make_upload_slots(size_t slot_bytes) {
  return std::make_unique<CpuUploadSlots>(slot_bytes);
}

// ---- GEMM -----------------------------------------------------------------------
// The widening scratch is memory a GEMM needs like any Buffer (the
// classifier's [rows, vocab] products widen to FP32 four times its FP16
// bytes), so its growth is in the allocation tally.
void CpuBackend::gemm_lowp(const GemmLowp& g) {
  const size_t before = gemm_scratch_.bytes();
  cpu_gemm_lowp(precision_, g, *pool_, gemm_scratch_);
  count_allocation(gemm_scratch_.bytes() - before);
}
void CpuBackend::gemm_lowp_to_fp32(const GemmLowp& g, float* c_fp32) {
  const size_t before = gemm_scratch_.bytes();
  cpu_gemm_lowp_to_fp32(precision_, g, c_fp32, *pool_, gemm_scratch_);
  count_allocation(gemm_scratch_.bytes() - before);
}

// ---- element-wise -----------------------------------------------------------------
void CpuBackend::cast_fp32_to_lowp(const float* src, lowp16* dst, size_t count) {
  pool_->parallel_for(count, kGrain, pieces(count),
                      [&](size_t i0, size_t i1) { cpu::narrow_fp32(precision_, src + i0, dst + i0, i1 - i0); });
}
void CpuBackend::add_fp32_into_lowp(const float* src, lowp16* y, size_t count) {
  pool_->parallel_for(count, kGrain, pieces(count), [&](size_t i0, size_t i1) {
    with_codec(precision_, [&](auto codec) {
      for (size_t i = i0; i < i1; ++i) y[i] = codec.narrow(codec.widen(y[i]) + src[i]);
    });
  });
}

// ---- losses -------------------------------------------------------------------------
void CpuBackend::softmax_xent_forward(const lowp16* logits, const int32_t* labels, int rows, int cols, int real_cols,
                                      float* loss_mean, int32_t* correct_count) {
  cpu::softmax_xent_forward(precision_, *pool_, xent_scratch_, logits, labels, rows, cols, real_cols, loss_mean,
                            correct_count);
}

void CpuBackend::softmax_xent_backward(const lowp16* logits, const int32_t* labels, int rows, int cols, int real_cols,
                                       ScalarArg loss_scale, lowp16* dlogits) {
  cpu::softmax_xent_backward(precision_, *pool_, logits, labels, rows, cols, real_cols, loss_scale.get(), dlogits);
}

void CpuBackend::softmax_xent_fused_rows(lowp16* logits_to_grad, const int32_t* labels, int rows, int cols,
                                         int real_cols, int total_rows, ScalarArg loss_scale, float* row_loss) {
  cpu::softmax_xent_fused_rows(precision_, *pool_, logits_to_grad, labels, rows, cols, real_cols, total_rows,
                               loss_scale.get(), row_loss);
}

void CpuBackend::loss_rows_mean(const float* row_loss, int rows, float* loss_mean) {
  *loss_mean = cpu::loss_rows_mean(row_loss, rows);
}

void CpuBackend::mse_forward(const lowp16* pred, const float* target, int rows, int cols, float* loss_mean) {
  const size_t n = static_cast<size_t>(rows) * cols;
  float sum = 0.0f;
  with_codec(precision_, [&](auto codec) {
    for (size_t i = 0; i < n; ++i) {
      const float d = codec.widen(pred[i]) - target[i];
      sum += d * d;
    }
  });
  *loss_mean = n ? sum / static_cast<float>(n) : 0.0f;
}

void CpuBackend::mse_backward(const lowp16* pred, const float* target, int rows, int cols, ScalarArg loss_scale,
                              lowp16* dpred) {
  const size_t n = static_cast<size_t>(rows) * cols;
  const float coef = 2.0f * loss_scale.get() / static_cast<float>(n);
  with_codec(precision_, [&](auto codec) {
    for (size_t i = 0; i < n; ++i) dpred[i] = codec.narrow(coef * (codec.widen(pred[i]) - target[i]));
  });
}

// ---- transformer operations (cpu_transformer.h) -------------------------------------
void CpuBackend::embedding_forward_lowp(const int32_t* tokens, const lowp16* wte, const lowp16* wpe, int batch,
                                        int seq_len, int channels, int vocab, lowp16* out) {
  cpu::embedding_forward(precision_, *pool_, tokens, wte, wpe, batch, seq_len, channels, vocab, out);
}
void CpuBackend::embedding_backward_lowp(const int32_t* tokens, const lowp16* dout, int batch, int seq_len,
                                         int channels, int vocab, lowp16* d_wte, lowp16* d_wpe, bool accumulate) {
  cpu::embedding_backward(precision_, *pool_, transformer_scratch_, tokens, dout, batch, seq_len, channels, vocab,
                          d_wte, d_wpe, accumulate);
}
void CpuBackend::layernorm_forward_lowp(const lowp16* x, const lowp16* gamma, const lowp16* beta, int rows, int cols,
                                        float eps, lowp16* y, float* mean, float* rstd) {
  cpu::layernorm_forward(precision_, *pool_, x, gamma, beta, rows, cols, eps, y, mean, rstd);
}
void CpuBackend::layernorm_backward_lowp(const lowp16* dy, const lowp16* x, const lowp16* gamma, const float* mean,
                                         const float* rstd, int rows, int cols, lowp16* dx, bool accumulate_dx,
                                         lowp16* dgamma, lowp16* dbeta, bool accumulate_params) {
  cpu::layernorm_backward(precision_, *pool_, dy, x, gamma, mean, rstd, rows, cols, dx, accumulate_dx, dgamma, dbeta,
                          accumulate_params);
}
void CpuBackend::gemm_batched_lowp(const GemmLowp& g, int batch_count, int64_t stride_a, int64_t stride_b,
                                   int64_t stride_c) {
  const auto scratch_bytes = [this] {
    size_t bytes = gemm_scratch_.bytes();
    for (const CpuGemmScratch& s : batched_gemm_scratch_) bytes += s.bytes();
    return bytes;
  };
  const size_t before = scratch_bytes();
  cpu_gemm_batched_lowp(precision_, g, batch_count, stride_a, stride_b, stride_c, *pool_, batched_gemm_scratch_);
  count_allocation(scratch_bytes() - before);
}
void CpuBackend::causal_softmax_forward_lowp(const lowp16* scores, int batch_heads, int seq_len, float scale,
                                             lowp16* probs) {
  cpu::causal_softmax_forward(precision_, *pool_, scores, batch_heads, seq_len, scale, probs);
}
void CpuBackend::causal_softmax_backward_lowp(const lowp16* probs, const lowp16* dprobs, int batch_heads, int seq_len,
                                              float scale, lowp16* dscores) {
  cpu::causal_softmax_backward(precision_, *pool_, probs, dprobs, batch_heads, seq_len, scale, dscores);
}
void CpuBackend::add_lowp(const lowp16* a, const lowp16* b, lowp16* y, size_t count) {
  cpu::add(precision_, *pool_, a, b, y, count);
}
void CpuBackend::rows_to_heads_lowp(const lowp16* rows, int row_stride, int batch, int seq_len, int heads,
                                    int head_size, lowp16* heads_out) {
  cpu::rows_to_heads(*pool_, rows, row_stride, batch, seq_len, heads, head_size, heads_out);
}
void CpuBackend::heads_to_rows_lowp(const lowp16* heads_in, int batch, int seq_len, int heads, int head_size,
                                    lowp16* rows, int row_stride) {
  cpu::heads_to_rows(*pool_, heads_in, batch, seq_len, heads, head_size, rows, row_stride);
}
void CpuBackend::attention_decode_lowp(const lowp16* q, int q_stride, const lowp16* k_cache, const lowp16* v_cache,
                                       int kv_stride, int heads, int head_size, int past_len, int new_len, float scale,
                                       lowp16* out, int out_stride) {
  cpu::attention_decode(precision_, *pool_, q, q_stride, k_cache, v_cache, kv_stride, heads, head_size, past_len,
                        new_len, scale, out, out_stride);
}
void CpuBackend::attention_forward_fused_lowp(const lowp16* q, const lowp16* k, const lowp16* v, int batch_heads,
                                              int seq_len, int head_size, float scale, lowp16* out, float* lse) {
  cpu::attention_forward_fused(precision_, *pool_, q, k, v, batch_heads, seq_len, head_size, scale, out, lse);
}
void CpuBackend::attention_backward_fused_lowp(const lowp16* q, const lowp16* k, const lowp16* v, const lowp16* out,
                                               const float* lse, const lowp16* dout, int batch_heads, int seq_len,
                                               int head_size, float scale, lowp16* dq, lowp16* dk, lowp16* dv) {
  cpu::attention_backward_fused(precision_, *pool_, q, k, v, out, lse, dout, batch_heads, seq_len, head_size, scale, dq,
                                dk, dv);
}

// ---- optimizer ---------------------------------------------------------------------
void CpuBackend::unscale_lowp_to_fp32(const lowp16* grads_lowp, float* grads_fp32, size_t count,
                                      ScalarArg inv_scale_arg, int32_t* nonfinite_flag) {
  const float inv_scale = inv_scale_arg.get();
  std::atomic<bool> bad{false};
  pool_->parallel_for(count, kGrain, pieces(count), [&](size_t i0, size_t i1) {
    if (cpu::unscale_range(precision_, grads_lowp + i0, grads_fp32 ? grads_fp32 + i0 : nullptr, i1 - i0, inv_scale))
      bad.store(true);
  });
  if (bad.load() && nonfinite_flag != nullptr) *nonfinite_flag = 1;
}

void CpuBackend::unscale_fp32(const float* grads_in, float* grads_out, size_t count, ScalarArg inv_scale_arg,
                              int32_t* nonfinite_flag) {
  const float inv_scale = inv_scale_arg.get();
  std::atomic<bool> bad{false};
  pool_->parallel_for(count, kGrain, pieces(count), [&](size_t i0, size_t i1) {
    if (cpu::unscale_fp32_range(grads_in + i0, grads_out + i0, i1 - i0, inv_scale)) bad.store(true);
  });
  if (bad.load() && nonfinite_flag != nullptr) *nonfinite_flag = 1;
}

void CpuBackend::l2_norm_fp32(const float* x, size_t count, float* norm) {
  // Double accumulation: the reference must be at least as accurate as the
  // CUDA tree reduction it is compared with.
  double sum = 0.0;
  for (size_t i = 0; i < count; ++i) sum += static_cast<double>(x[i]) * x[i];
  *norm = static_cast<float>(std::sqrt(sum));
}

void CpuBackend::sgd_update(const SgdParams& step_params, const SgdGrads& grads, float* master_fp32,
                            float* momentum_fp32, lowp16* weights_lowp, size_t count, const int32_t* skip_flag) {
  // The CUDA launchers' checks, so the backends accept the same calls; an
  // empty range (null buffers) passes them and does nothing.
  require_sgd_buffers(step_params, grads, momentum_fp32, count);
  if (count == 0 || (skip_flag && *skip_flag)) return;
  const SgdParams params = resolved(step_params);
  if (grads.fp32 != nullptr) {
    pool_->parallel_for(count, kGrain, pieces(count), [&](size_t i0, size_t i1) {
      cpu::sgd_range(precision_, params, grads.fp32 + i0, master_fp32 + i0,
                     momentum_fp32 ? momentum_fp32 + i0 : nullptr, weights_lowp + i0, i1 - i0);
    });
    return;
  }
  const float inv_scale = grads.inv_scale.get();
  pool_->parallel_for(count, kGrain, pieces(count), [&](size_t i0, size_t i1) {
    cpu::sgd_lowp_grads_range(precision_, params, grads.lowp + i0, inv_scale, master_fp32 + i0,
                              momentum_fp32 ? momentum_fp32 + i0 : nullptr, weights_lowp + i0, i1 - i0);
  });
}

void CpuBackend::adamw_update(const AdamWParams& step_params, const AdamWBuffers& b, ScalarArg inv_scale_arg,
                              size_t offset, size_t count, const int32_t* skip_flag) {
  require_adamw_buffers(b, count);
  if (count == 0 || (skip_flag && *skip_flag)) return;
  const AdamWScalars scalars = adamw_scalars(step_params);
  const float inv_scale = inv_scale_arg.get();
  pool_->parallel_for(count, kGrain, pieces(count), [&](size_t i0, size_t i1) {
    cpu::adamw_range(precision_, scalars, b, inv_scale, offset + i0, offset + i1);
  });
}

// ---- device-resident step state -----------------------------------------------------
void CpuBackend::step_status_prepare(StepStatus* status, double backward_divisor, double unscale_divisor, float lr) {
  ddp::step_status_prepare(*status, backward_divisor, unscale_divisor, lr);
}

void CpuBackend::step_status_finish(const LossScaleRule& rule, StepStatus* status) {
  ddp::step_status_finish(rule, *status);
}

}  // namespace ddp
