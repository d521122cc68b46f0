// cuda_backend.h: the Backend on one NVIDIA GPU. Everything is queued on one
// non-blocking `compute_stream` in call order: the ops of kernels/ops/ run
// their CUDA rows with this backend as their CudaOpContext (its stream, its
// grown scratch, its cuBLASLt plans for the GEMMs, cuda_gemm.h).
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
#include "kernels/cuda/cuda_op_context.h"
#include "kernels/cuda/cuda_raii.h"
#include "kernels/graph_safe_growth.h"

namespace ddp {

class CublasLtGemm;

class CudaBackend final : public Backend, public CudaOpContext {
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
  // The ops' CUDA rows run on it (cuda_op_context.h).
  cudaStream_t stream() const override { return compute_stream(); }
  // Device scratch for multi-pass reductions, grown on demand (never shrunk)
  // so steady-state training allocates nothing.
  void* scratch(size_t size_bytes) override;
  CublasLtGemm& cublaslt_gemm() override;

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
