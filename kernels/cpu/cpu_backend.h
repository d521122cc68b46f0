// cpu_backend.h: the reference Backend. 16-bit operands (FP16 or BF16, the
// backend's precision) widen exactly to FP32, a real BLAS (cblas_sgemm)
// multiplies, results round once to the precision: the same
// arithmetic contract as a Tensor Core GEMM with FP32 accumulation
// (cpu_gemm.h). Large GEMMs and element-wise passes are split over the
// backend's own threads (cpu_thread_pool.h), each BLAS call single-threaded
// inside one of them; the loops themselves are in cpu_elementwise.h.
#pragma once

#include <memory>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_gemm.h"
#include "kernels/cpu/cpu_thread_pool.h"
#include "kernels/cpu/cpu_transformer.h"
#include "kernels/cpu/cpu_xent.h"

namespace ddp {

class CpuBackend final : public Backend {
 public:
  // Runs on `threads` threads (the caller and threads - 1 workers); threads
  // <= 0: as many as the BLAS thread count in force, which is left as it is.
  // Its 16-bit buffers hold `precision`'s format.
  explicit CpuBackend(int threads = 0, Precision precision = Precision::Fp16);
  DeviceKind kind() const override { return DeviceKind::Cpu; }
  std::string description() const override;
  Precision precision() const override { return precision_; }

  void* allocate_bytes(size_t size_bytes) override;
  void free_bytes(void* ptr) noexcept override;
  void copy_to_device(void* dst, const void* src_host, size_t size_bytes) override;
  void copy_to_host(void* dst_host, const void* src, size_t size_bytes) override;
  void copy_on_device(void* dst, const void* src, size_t size_bytes) override;
  void fill_zero(void* dst, size_t size_bytes) override;
  void synchronize() override {}
  std::unique_ptr<UploadSlots> make_upload_slots(size_t slot_bytes) override;

  void gemm_lowp(const GemmLowp& g) override;

  void gemm_lowp_to_fp32(const GemmLowp& g, float* c_fp32) override;
  void cast_fp32_to_lowp(const float* src, lowp16* dst, size_t count) override;
  void add_fp32_into_lowp(const float* src, lowp16* y, size_t count) override;

  void softmax_xent_forward(const lowp16* logits, const int32_t* labels, int rows, int cols, int real_cols,
                            float* loss_mean, int32_t* correct_count) override;
  void softmax_xent_backward(const lowp16* logits, const int32_t* labels, int rows, int cols, int real_cols,
                             ScalarArg loss_scale, lowp16* dlogits) override;
  void softmax_xent_fused_rows(lowp16* logits_to_grad, const int32_t* labels, int rows, int cols, int real_cols,
                               int total_rows, ScalarArg loss_scale, float* row_loss) override;
  void loss_rows_mean(const float* row_loss, int rows, float* loss_mean) override;
  void mse_forward(const lowp16* pred, const float* target, int rows, int cols, float* loss_mean) override;
  void mse_backward(const lowp16* pred, const float* target, int rows, int cols, ScalarArg loss_scale,
                    lowp16* dpred) override;

  void embedding_forward_lowp(const int32_t* tokens, const lowp16* wte, const lowp16* wpe, int batch, int seq_len,
                              int channels, int vocab, lowp16* out) override;
  void embedding_backward_lowp(const int32_t* tokens, const lowp16* dout, int batch, int seq_len, int channels,
                               int vocab, lowp16* d_wte, lowp16* d_wpe, bool accumulate) override;
  void layernorm_forward_lowp(const lowp16* x, const lowp16* gamma, const lowp16* beta, int rows, int cols, float eps,
                              lowp16* y, float* mean, float* rstd) override;
  void layernorm_backward_lowp(const lowp16* dy, const lowp16* x, const lowp16* gamma, const float* mean,
                               const float* rstd, int rows, int cols, lowp16* dx, bool accumulate_dx, lowp16* dgamma,
                               lowp16* dbeta, bool accumulate_params) override;
  void gemm_batched_lowp(const GemmLowp& g, int batch_count, int64_t stride_a, int64_t stride_b,
                         int64_t stride_c) override;
  void causal_softmax_forward_lowp(const lowp16* scores, int batch_heads, int seq_len, float scale,
                                   lowp16* probs) override;
  void causal_softmax_backward_lowp(const lowp16* probs, const lowp16* dprobs, int batch_heads, int seq_len,
                                    float scale, lowp16* dscores) override;
  void add_lowp(const lowp16* a, const lowp16* b, lowp16* y, size_t count) override;
  void rows_to_heads_lowp(const lowp16* rows, int row_stride, int batch, int seq_len, int heads, int head_size,
                          lowp16* heads_out) override;
  void heads_to_rows_lowp(const lowp16* heads_in, int batch, int seq_len, int heads, int head_size, lowp16* rows,
                          int row_stride) override;
  void attention_decode_lowp(const lowp16* q, int q_stride, const lowp16* k_cache, const lowp16* v_cache, int kv_stride,
                             int heads, int head_size, int past_len, int new_len, float scale, lowp16* out,
                             int out_stride) override;
  void attention_forward_fused_lowp(const lowp16* q, const lowp16* k, const lowp16* v, int batch_heads, int seq_len,
                                    int head_size, float scale, lowp16* out, float* lse) override;
  void attention_backward_fused_lowp(const lowp16* q, const lowp16* k, const lowp16* v, const lowp16* out,
                                     const float* lse, const lowp16* dout, int batch_heads, int seq_len, int head_size,
                                     float scale, lowp16* dq, lowp16* dk, lowp16* dv) override;

  void unscale_lowp_to_fp32(const lowp16* grads_lowp, float* grads_fp32, size_t count, ScalarArg inv_scale,
                            int32_t* nonfinite_flag) override;
  void unscale_fp32(const float* grads_in, float* grads_out, size_t count, ScalarArg inv_scale,
                    int32_t* nonfinite_flag) override;
  void l2_norm_fp32(const float* x, size_t count, float* norm) override;
  void sgd_update(const SgdParams& params, const SgdGrads& grads, float* master_fp32, float* momentum_fp32,
                  lowp16* weights_lowp, size_t count, const int32_t* skip_flag) override;
  void adamw_update(const AdamWParams& params, const AdamWBuffers& b, ScalarArg inv_scale, size_t offset, size_t count,
                    const int32_t* skip_flag) override;
  void step_status_prepare(StepStatus* status, double backward_divisor, double unscale_divisor, float lr) override;
  void step_status_finish(const LossScaleRule& rule, StepStatus* status) override;

  int threads() const { return threads_; }

 private:
  // How many pieces to cut an element-wise pass over `elements` into.
  size_t pieces(size_t elements) const;

  int threads_ = 1;
  Precision precision_ = Precision::Fp16;
  std::unique_ptr<CpuThreadPool> pool_;
  // GEMM scratch, reused across calls. Not thread-safe: one CpuBackend per
  // compute thread.
  CpuGemmScratch gemm_scratch_;
  std::vector<CpuGemmScratch> batched_gemm_scratch_;  // one per piece of a batch (cpu_gemm.h)
  cpu::TransformerScratch transformer_scratch_;
  cpu::XentScratch xent_scratch_;
};

// How many pieces CpuBackend cuts a pass over `elements` into on `threads`
// threads: 1 (the calling thread alone) below a size where handing work
// out costs more than it saves. Shared with cpu_transformer.cpp.
size_t cpu_pass_pieces(size_t elements, int threads);

// Sets the BLAS library's thread count (OpenBLAS; threads <= 0: leaves it);
// returns what is in force.
int set_blas_threads(int threads);

}  // namespace ddp
