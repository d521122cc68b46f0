// cpu_backend.h: the reference Backend. FP16 operands widen exactly to FP32,
// a real BLAS (cblas_sgemm) multiplies, results round once to FP16: the same
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

namespace ddp {

class CpuBackend final : public Backend {
 public:
  // Runs on `threads` threads (the caller and threads - 1 workers); threads
  // <= 0: as many as the BLAS thread count in force, which is left as it is.
  explicit CpuBackend(int threads = 0);
  DeviceKind kind() const override { return DeviceKind::Cpu; }
  std::string description() const override;

  void* allocate_bytes(size_t size_bytes) override;
  void free_bytes(void* ptr) noexcept override;
  void copy_to_device(void* dst, const void* src_host, size_t size_bytes) override;
  void copy_to_host(void* dst_host, const void* src, size_t size_bytes) override;
  void copy_on_device(void* dst, const void* src, size_t size_bytes) override;
  void fill_zero(void* dst, size_t size_bytes) override;
  void synchronize() override {}
  std::unique_ptr<UploadSlots> make_upload_slots(size_t slot_bytes) override;

  void gemm_fp16(const GemmFp16& g) override;

  void add_bias_fp16(half16* y, const half16* bias, int rows, int cols) override;
  void activation_forward_fp16(Activation act, const half16* z, half16* y, size_t count) override;
  void activation_backward_fp16(Activation act, const half16* z, const half16* dy, half16* dz,
                                size_t count) override;
  void bias_grad_fp16(const half16* dy, int rows, int cols, half16* db, bool accumulate) override;
  void cast_fp32_to_fp16(const float* src, half16* dst, size_t count) override;
  void cast_fp16_to_fp32(const half16* src, float* dst, size_t count) override;

  void softmax_xent_forward(const half16* logits, const int32_t* labels, int rows, int cols, float* loss_mean,
                            int32_t* correct_count) override;
  void softmax_xent_backward(const half16* logits, const int32_t* labels, int rows, int cols, ScalarArg loss_scale,
                             half16* dlogits) override;
  void mse_forward(const half16* pred, const float* target, int rows, int cols, float* loss_mean) override;
  void mse_backward(const half16* pred, const float* target, int rows, int cols, ScalarArg loss_scale,
                    half16* dpred) override;

  void unscale_fp16_to_fp32(const half16* grads_fp16, float* grads_fp32, size_t count, ScalarArg inv_scale,
                            int32_t* nonfinite_flag) override;
  void l2_norm_fp32(const float* x, size_t count, float* norm) override;
  void sgd_update_fp16_grads(const SgdParams& params, const half16* grads_fp16, ScalarArg inv_scale, float* master_fp32,
                             float* momentum_fp32, half16* weights_fp16, size_t count,
                             const int32_t* skip_flag) override;
  void sgd_update(const SgdParams& params, const float* grads_fp32, float* master_fp32, float* momentum_fp32,
                  half16* weights_fp16, size_t count, const int32_t* skip_flag) override;
  void adamw_update(const AdamWParams& params, const AdamWBuffers& b, ScalarArg inv_scale, size_t offset,
                    size_t count, const int32_t* skip_flag) override;
  void step_status_prepare(StepStatus* status, double backward_divisor, double unscale_divisor, float lr) override;
  void step_status_finish(const LossScaleRule& rule, StepStatus* status) override;

  int threads() const { return threads_; }

 private:
  // How many pieces to cut an element-wise pass over `elements` into.
  size_t pieces(size_t elements) const;

  int threads_ = 1;
  std::unique_ptr<CpuThreadPool> pool_;
  // GEMM scratch, reused across calls. Not thread-safe: one CpuBackend per
  // compute thread.
  CpuGemmScratch gemm_scratch_;
};

// Sets the BLAS library's thread count (OpenBLAS; threads <= 0: leaves it);
// returns what is in force.
int set_blas_threads(int threads);

}  // namespace ddp
