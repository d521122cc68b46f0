// cuda_backend.cpp: CudaBackend's device setup, memory, copies,
// synchronisation and capture, and what the ops' CUDA rows run with (the
// stream, scratch, cuBLASLt's plans). Everything is queued on
// compute_stream in call order.
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_stream_marks.h"

#include <algorithm>
#include <exception>
#include <cstdio>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_elementwise.h"
#include "kernels/cuda/cuda_gemm.h"
#include "kernels/cuda/cuda_upload_slots.h"
#include "kernels/error.h"

namespace ddp {
namespace {

// Enough for the two-pass reductions and cross-entropy over 8k rows; grown
// on demand beyond that.
constexpr size_t kInitialScratchBytes = size_t{64} << 10;

std::string describe_device(int device) {
  cudaDeviceProp prop{};
  DDP_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  char memory_gib[32];
  std::snprintf(memory_gib, sizeof(memory_gib), "%.1f",
                static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
  return "CUDA device " + std::to_string(device) + ": " + prop.name + " (compute capability " +
         std::to_string(prop.major) + "." + std::to_string(prop.minor) + ", " + memory_gib + " GiB)";
}

// BF16 Tensor Core GEMMs (and cuBLASLt's BF16 algorithms) begin with
// Ampere; before it every BF16 GEMM would take the slow CUDA-core fallback,
// so the run is refused instead of silently crawling.
void require_precision_supported(Precision precision, int device) {
  if (precision != Precision::Bf16) return;
  int major = 0;
  DDP_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  if (major < 8)
    throw Error("--precision bf16 needs a GPU of compute capability 8.0 (Ampere) or newer; CUDA device " +
                std::to_string(device) + " is " + std::to_string(major) + ".x: use --precision fp16");
}

}  // namespace

CudaBackend::CudaBackend(int device, Precision precision) : device_(device), precision_(precision) {
  int count = 0;
  DDP_CUDA_CHECK(cudaGetDeviceCount(&count));
  DDP_REQUIRE(device >= 0 && device < count,
              "CudaBackend: device " + std::to_string(device) + " requested, " + std::to_string(count) + " visible");
  DDP_CUDA_CHECK(cudaSetDevice(device_));
  description_ = describe_device(device_);
  check_kernel_image_for_current_device();
  require_precision_supported(precision_, device_);
  compute_stream_ = make_non_blocking_stream();
  gemm_ = std::make_unique<CublasLtGemm>(kGemmWorkspaceBytes, precision_);
  scratch_ = cuda_malloc_unique(kInitialScratchBytes);
  scratch_bytes_ = kInitialScratchBytes;
  set_op_rows({nullptr, this, nullptr});
}

size_t CudaBackend::device_used_bytes() const {
  size_t free_bytes = 0, total_bytes = 0;
  DDP_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return total_bytes - free_bytes;
}

CudaBackend::~CudaBackend() {
  if (capturing_) {  // a capture abandoned by an exception: end it so the stream is usable
    cudaGraph_t graph = nullptr;
    if (cudaStreamEndCapture(compute_stream_.get(), &graph) == cudaSuccess && graph) cudaGraphDestroy(graph);
  }
  if (skips_device_waits()) {
    // A replay may never end (skips_device_waits): leave the GEMM's
    // workspace and plans and the scratch, which it may still use, to the
    // end of the process. Destroying the graphs and the stream does not
    // wait: CUDA frees them once their work ends.
    static_cast<void>(gemm_.release());
    static_cast<void>(scratch_.release());
    return;
  }
  // Queued kernels (and graph launches) may still use the workspace and scratch freed below.
  if (compute_stream_) DDP_CUDA_CHECK_NOTHROW(cudaStreamSynchronize(compute_stream_.get()));
}

bool CudaBackend::skips_device_waits() const noexcept { return graph_launched_ && std::uncaught_exceptions() > 0; }

void* CudaBackend::scratch(size_t size_bytes) {
  if (size_bytes > scratch_bytes_) {
    const size_t grown = std::max(size_bytes, 2 * kInitialScratchBytes);
    require_buffer_may_grow(capture_state(), "CudaBackend reduction scratch", scratch_bytes_, grown);
    // Kernels queued earlier may still read the old block.
    DDP_CUDA_CHECK(cudaStreamSynchronize(compute_stream()));
    scratch_.reset();
    scratch_bytes_ = 0;
    scratch_ = cuda_malloc_unique(grown);
    scratch_bytes_ = grown;
  }
  return scratch_.get();
}

void CudaBackend::force_simple_gemm_for_testing(bool on) { gemm_->force_simple(on); }

GemmRouteCounts CudaBackend::gemm_route_counts_for_testing() const { return gemm_->route_counts(); }

// ---- memory -----------------------------------------------------------------

void* CudaBackend::allocate_bytes(size_t size_bytes) {
  if (size_bytes == 0) return nullptr;
  // cudaMalloc inside a capture would invalidate it with an opaque error at
  // the end; say what happened where it happened.
  if (capturing_)
    throw Error("allocating a " + std::to_string(size_bytes) +
                "-byte device buffer inside a CUDA graph capture, where allocating is not allowed; create it "
                "before the capture (one eager step of the same shapes)");
  // cudaMalloc allocates on the calling thread's current device.
  DDP_CUDA_CHECK(cudaSetDevice(device_));
  void* ptr = nullptr;
  DDP_CUDA_CHECK(cudaMalloc(&ptr, size_bytes));
  return ptr;
}

void CudaBackend::free_bytes(void* ptr) noexcept {
  if (!ptr) return;
  if (skips_device_waits()) return;  // leaked: a replay that never ends may still use it
  if (capturing_) {
    // noexcept (destructors call it): freeing inside a capture would wait for
    // the device and invalidate the capture. Leaked, and said.
    std::fprintf(stderr,
                 "ddp: a device buffer was freed inside a CUDA graph capture, where freeing is not allowed; it "
                 "is leaked (free it after end_capture)\n");
    return;
  }
  // Kernels queued on compute_stream may still use the memory. cudaFree
  // waits for the device in practice, but that is not a documented promise;
  // frees are rare, so wait for our stream explicitly.
  DDP_CUDA_CHECK_NOTHROW(cudaStreamSynchronize(compute_stream()));
  DDP_CUDA_CHECK_NOTHROW(cudaFree(ptr));
}

void CudaBackend::copy_to_device(void* dst, const void* src_host, size_t size_bytes) {
  require_not_capturing("copy_to_device");
  if (size_bytes == 0) return;
  // Queued on compute_stream so it is ordered after work that still reads
  // dst. The host waits for the copy: the caller may reuse src_host at once
  // (the driver documents that only for pageable memory, and a pinned source
  // would be read later). Uploads are per batch, not per kernel; a pinned,
  // double-buffered loader path can lift this wait if it ever shows up.
  DDP_CUDA_CHECK(cudaMemcpyAsync(dst, src_host, size_bytes, cudaMemcpyHostToDevice, compute_stream()));
  DDP_CUDA_CHECK(cudaStreamSynchronize(compute_stream()));
}

void CudaBackend::copy_to_host(void* dst_host, const void* src, size_t size_bytes) {
  require_not_capturing("copy_to_host");
  if (size_bytes == 0) return;
  // Same stream: waits for every kernel that writes src.
  DDP_CUDA_CHECK(cudaMemcpyAsync(dst_host, src, size_bytes, cudaMemcpyDeviceToHost, compute_stream()));
  DDP_CUDA_CHECK(cudaStreamSynchronize(compute_stream()));
}

void CudaBackend::copy_on_device(void* dst, const void* src, size_t size_bytes) {
  if (size_bytes == 0) return;
  DDP_CUDA_CHECK(cudaMemcpyAsync(dst, src, size_bytes, cudaMemcpyDeviceToDevice, compute_stream()));
}

void CudaBackend::fill_zero(void* dst, size_t size_bytes) {
  if (size_bytes == 0) return;
  DDP_CUDA_CHECK(cudaMemsetAsync(dst, 0, size_bytes, compute_stream()));
}

void CudaBackend::synchronize() {
  require_not_capturing("synchronize");
  DDP_CUDA_CHECK(cudaStreamSynchronize(compute_stream()));
}

// ---- step capture -------------------------------------------------------------------

void CudaBackend::require_not_capturing(const char* what) const {
  if (capturing_) throw Error(std::string(what) + " inside a step capture (it would wait for the device)");
}

CaptureState CudaBackend::capture_state() const {
  if (capturing_) return CaptureState::kCapturing;
  return graphs_.empty() ? CaptureState::kNone : CaptureState::kCaptured;
}

void CudaBackend::begin_capture() {
  require_not_capturing("begin_capture");
  // Thread-local mode: only this thread's calls that are unsafe in a capture
  // (allocations, host waits) invalidate it; NCCL's proxy threads and the
  // watchdog thread are not affected.
  DDP_CUDA_CHECK(cudaStreamBeginCapture(compute_stream(), cudaStreamCaptureModeThreadLocal));
  capturing_ = true;
}

int CudaBackend::end_capture() {
  DDP_REQUIRE(capturing_, "end_capture without begin_capture");
  capturing_ = false;
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(compute_stream(), &graph);
  if (ended != cudaSuccess || graph == nullptr)
    throw Error(std::string("CUDA graph capture of the training step failed: ") + cudaGetErrorString(ended));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
  DDP_CUDA_CHECK_NOTHROW(cudaGraphDestroy(graph));  // the executable graph keeps what it needs
  if (made != cudaSuccess)
    throw Error(std::string("CUDA graph instantiation of the training step failed: ") + cudaGetErrorString(made));
  graphs_.emplace_back(exec);
  return static_cast<int>(graphs_.size()) - 1;
}

void CudaBackend::release_captures() noexcept {
  if (graphs_.empty()) return;
  // cudaGraphExecDestroy of a graph still running frees it once it ends.
  if (std::uncaught_exceptions() == 0) DDP_CUDA_CHECK_NOTHROW(cudaStreamSynchronize(compute_stream()));
  graphs_.clear();
}

void CudaBackend::replay(int recording) {
  require_not_capturing("replay");
  DDP_REQUIRE(recording >= 0 && static_cast<size_t>(recording) < graphs_.size(), "replay of an unknown capture");
  graph_launched_ = true;  // before the launch: a launch that fails half-way may have queued work
  DDP_CUDA_CHECK(cudaGraphLaunch(graphs_[static_cast<size_t>(recording)].get(), compute_stream()));
}

std::unique_ptr<StreamMarks> CudaBackend::make_stream_marks() {
  DDP_CUDA_CHECK(cudaSetDevice(device_));  // the events belong to this backend's device
  return std::make_unique<CudaStreamMarks>(compute_stream());
}

std::unique_ptr<UploadSlots> CudaBackend::make_upload_slots(size_t slot_bytes) {
  DDP_CUDA_CHECK(cudaSetDevice(device_));  // the slots' memory and copy stream belong to our device
  return std::make_unique<CudaUploadSlots>(compute_stream(), slot_bytes,
                                           [this]() noexcept { return skips_device_waits(); });
}

// ---- GEMM (ops/gemm.h's CUDA rows) ---------------------------------------------

CublasLtGemm& CudaBackend::cublaslt_gemm() {
  gemm_->set_capture_state(capture_state());
  return *gemm_;
}

}  // namespace ddp
