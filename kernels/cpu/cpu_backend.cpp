// cpu_backend.cpp: the CPU backend's memory and copies, its threads and how
// a pass is cut into pieces for them; the BLAS thread count.
#include "kernels/cpu/cpu_backend.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

#include "kernels/cpu/cpu_elementwise.h"
#include "kernels/cpu/cpu_upload_slots.h"
#include "kernels/error.h"
#include "kernels/half_convert.h"

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
}  // namespace

size_t cpu_pass_pieces(size_t elements, int threads) {
  return elements < kMinParallelElements ? 1 : static_cast<size_t>(threads) * kPiecesPerThread;
}

size_t CpuBackend::pieces(size_t elements) const { return cpu_pass_pieces(elements, threads_); }

CpuBackend::CpuBackend(int threads, Precision precision)
    : threads_(threads > 0 ? threads : std::max(set_blas_threads(0), 1)),
      precision_(precision),
      pool_(std::make_unique<CpuThreadPool>(threads_)) {
  set_op_rows({this, nullptr, nullptr});
}

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

}  // namespace ddp
