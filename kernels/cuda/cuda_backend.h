// cuda_backend.h: the Backend on one NVIDIA GPU. Everything is queued on one
// non-blocking `compute_stream` in call order; GEMMs go through cuBLASLt
// (cuda_gemm.h), the rest through the kernels in cuda_elementwise.cu,
// cuda_loss.cu, cuda_optimizer.cu and the GPT's (cuda_transformer.h), whose
// element-wise math is the shared code in elementwise_math.h /
// transformer_math.h / half.h.
//
// Threading: one CudaBackend per host thread. The constructor makes `device`
// current on the calling thread; the methods assume it still is (kernels are
// launched on compute_stream, which belongs to that device).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "kernels/backend.h"
#include "kernels/cuda/cuda_gemm_route.h"
#include "kernels/cuda/cuda_raii.h"
#include "kernels/graph_safe_growth.h"

namespace ddp {

class CublasLtGemm;

class CudaBackend final : public Backend {
 public:
  // cuBLASLt workspace: 32 MiB is what NVIDIA recommends for Hopper (and is
  // ample for Ampere); allocated once, reused by every GEMM.
  static constexpr size_t kGemmWorkspaceBytes = size_t{32} << 20;

  // Its 16-bit buffers hold `precision`'s format. Throws ddp::Error when
  // the device does not exist, the build has no kernels for it, BF16 is
  // asked of a device before Ampere, or memory for the workspace is missing.
  explicit CudaBackend(int device = 0, Precision precision = Precision::Fp16);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  DeviceKind kind() const override { return DeviceKind::Cuda; }
  Precision precision() const override { return precision_; }
  size_t device_used_bytes() const override;
  std::string description() const override { return description_; }
  int device() const { return device_; }
  // The stream every operation is queued on; other streams (communication)
  // order themselves against it with events.
  cudaStream_t compute_stream() const { return compute_stream_.get(); }

  void* allocate_bytes(size_t size_bytes) override;
  void free_bytes(void* ptr) noexcept override;
  // Returns once `src_host` may be reused (the copy is synchronous with
  // respect to the host, as on CpuBackend).
  void copy_to_device(void* dst, const void* src_host, size_t size_bytes) override;
  void copy_to_host(void* dst_host, const void* src, size_t size_bytes) override;
  void copy_on_device(void* dst, const void* src, size_t size_bytes) override;
  void fill_zero(void* dst, size_t size_bytes) override;
  void synchronize() override;
  // CudaUploadSlots (cuda_upload_slots.h) whose consumer is compute_stream.
  std::unique_ptr<UploadSlots> make_upload_slots(size_t slot_bytes) override;
  // CudaStreamMarks (cuda_stream_marks.h): events on compute_stream.
  std::unique_ptr<StreamMarks> make_stream_marks() override;

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

  // Stream capture of compute_stream into CUDA graphs (backend.h).
  bool supports_capture() const override { return true; }
  void begin_capture() override;
  int end_capture() override;
  void replay(int recording) override;
  void release_captures() noexcept override;

  // True while an exception unwinds and this backend has launched a CUDA
  // graph. A replay holds collectives that wait for every peer, and once a
  // rank has failed some never come, so the device work queued here may
  // never end: the destructors and frees of this backend's memory (buffers,
  // upload slots, the backend's own) then skip their waits for the device,
  // and leave the memory to the end of the process, which main's catch
  // brings about next (MPI_Abort, or exit). Waiting instead would hang the
  // unwinding before main could end the job. cudaFree and cudaFreeHost are
  // skipped too, since they wait for the device in practice. Without a
  // graph the waits stay: freeing promptly keeps code that throws through
  // buffers (and its tests) from leaking device memory, and eager steps are
  // where the collective watchdog marks the host's waits. Sticky: the
  // replays' end is not tracked, and the cost is only a leak while
  // unwinding.
  bool skips_device_waits() const noexcept;

  // For tests: route every GEMM through the plain CUDA-core kernel that is
  // otherwise used only where cuBLASLt offers no algorithm, so that path is
  // checked too.
  void force_simple_gemm_for_testing(bool on);
  // For tests: how many gemm_lowp calls took each route (cuda_gemm_route.h),
  // so a test can tell a fused cuBLASLt epilogue from a silent fallback.
  GemmRouteCounts gemm_route_counts_for_testing() const;

 private:
  // Device scratch for multi-pass reductions, grown on demand (never shrunk)
  // so steady-state training allocates nothing.
  void* scratch(size_t size_bytes);
  // Host waits are not allowed inside a capture; say which call tried.
  void require_not_capturing(const char* what) const;
  // Whether buffers grown on demand (scratch_, the GEMM's) may still be
  // reallocated: not inside a capture, nor once a graph holds their pointers.
  CaptureState capture_state() const;

  int device_ = 0;
  Precision precision_ = Precision::Fp16;
  std::string description_;
  // Declaration order is destruction order reversed: the stream outlives
  // everything that queues work on it.
  UniqueCudaStream compute_stream_;
  std::unique_ptr<CublasLtGemm> gemm_;
  UniqueDeviceMemory scratch_;
  size_t scratch_bytes_ = 0;
  bool capturing_ = false;
  bool graph_launched_ = false;              // replay() ran at least once (sticky: see skips_device_waits)
  std::vector<UniqueCudaGraphExec> graphs_;  // instantiated captures, by handle
};

}  // namespace ddp
