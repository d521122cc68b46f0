// cpu_backend.h: the reference Backend: host memory, synchronous copies,
// and what the ops' CPU rows (kernels/ops/*_cpu.cpp) run with: the 16-bit
// precision, the backend's own threads (cpu_thread_pool.h; a large pass or
// GEMM is split over them, each BLAS call single-threaded inside one), and
// scratch kept between calls.
#pragma once

#include <memory>
#include <typeindex>
#include <typeinfo>
#include <unordered_map>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_thread_pool.h"

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

  int threads() const { return threads_; }

  // ---- for the ops' CPU rows (kernels/ops/*_cpu.cpp) -------------------------
  // fn(i0, i1) over pieces of [0, count) on the backend's threads, in turn;
  // one piece on the calling thread where the pass is short (pieces()).
  // Piece bounds fall on whole cache lines of floats.
  template <class Fn>
  void parallel_pass(size_t count, Fn&& fn) {
    pool_->parallel_for(count, kPassGrain, pieces(count), fn);
  }
  // fn(r0, r1) over pieces of the rows [0, rows) of `width` elements each,
  // cut as a pass over rows * width elements is.
  template <class Fn>
  void parallel_rows(size_t rows, size_t width, Fn&& fn) {
    pool_->parallel_for(rows, 1, pieces(rows * width), fn);
  }
  CpuThreadPool& pool() { return *pool_; }
  // What a CPU row keeps between calls (per-row partial results, sort
  // orders): one T per backend, made on first use, so a training step
  // allocates nothing once warm. Not thread-safe, as the backend.
  template <class T>
  T& row_scratch() {
    std::shared_ptr<void>& slot = row_scratch_[std::type_index(typeid(T))];
    if (!slot) slot = std::make_shared<T>();
    return *static_cast<T*>(slot.get());
  }

 private:
  static constexpr size_t kPassGrain = 64;
  // How many pieces to cut an element-wise pass over `elements` into.
  size_t pieces(size_t elements) const;

  int threads_ = 1;
  Precision precision_ = Precision::Fp16;
  std::unique_ptr<CpuThreadPool> pool_;
  std::unordered_map<std::type_index, std::shared_ptr<void>> row_scratch_;
};

// A shape's int as a count, a negative one as 0: the CPU rows check their
// shapes, then index in size_t.
inline size_t count_of(int n) { return n > 0 ? static_cast<size_t>(n) : 0; }

// How many pieces CpuBackend cuts a pass over `elements` into on `threads`
// threads: 1 (the calling thread alone) below a size where handing work
// out costs more than it saves. Shared with cpu_transformer.cpp.
size_t cpu_pass_pieces(size_t elements, int threads);

// Sets the BLAS library's thread count (OpenBLAS; threads <= 0: leaves it);
// returns what is in force.
int set_blas_threads(int threads);

}  // namespace ddp
