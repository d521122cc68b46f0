// cpu_thread_pool.h: the fixed team of threads CpuBackend splits its large
// kernels over (GEMM slices, element-wise ranges).
//
// Why our own team instead of the BLAS's: the BLAS parallelises only inside
// a GEMM, and between GEMMs its idle workers spin (sched_yield) on the cores
// that our element-wise passes need. With one team for everything, each
// BLAS call runs single-threaded inside one of our threads, the conversions
// around it run in the same threads, and nobody competes for the cores.
//
// Work is split by index ranges that depend only on the count and the team
// size, never on timing, so results are the same from run to run.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace ddp {

class CpuThreadPool {
 public:
  // threads >= 1: the caller plus threads - 1 started workers.
  explicit CpuThreadPool(int threads);
  ~CpuThreadPool();
  CpuThreadPool(const CpuThreadPool&) = delete;
  CpuThreadPool& operator=(const CpuThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(t) for t = 0 .. size()-1 (t = 0 on the calling thread) and
  // returns when every call has returned; rethrows the first exception.
  // A run() from inside a running fn (or on another thread meanwhile) runs
  // its calls one after another on the caller instead.
  template <class Fn>
  void run(Fn&& fn) {
    using F = std::remove_reference_t<Fn>;
    run_erased([](void* ctx, int t) { (*static_cast<F*>(ctx))(t); }, const_cast<void*>(static_cast<const void*>(&fn)));
  }

  // Splits [0, count) into size() contiguous ranges whose boundaries are
  // multiples of `grain`, and calls fn(begin, end) for each non-empty one.
  // Below `min_parallel` (or with one thread) it is a single call
  // fn(0, count) on the caller: waking a worker costs more than small work.
  template <class Fn>
  void parallel_for(size_t count, size_t grain, size_t min_parallel, Fn&& fn) {
    if (count == 0) return;
    const size_t parts = static_cast<size_t>(size());
    if (parts == 1 || count < min_parallel) return fn(size_t{0}, count);
    const size_t g = grain ? grain : 1;
    const size_t chunk = ((count + parts - 1) / parts + g - 1) / g * g;
    run([&](int t) {
      const size_t begin = static_cast<size_t>(t) * chunk;
      const size_t end = begin + chunk < count ? begin + chunk : count;
      if (begin < end) fn(begin, end);
    });
  }

 private:
  using Call = void (*)(void* ctx, int thread_index);
  void run_erased(Call call, void* ctx);
  void worker_loop(int thread_index);

  std::vector<std::thread> workers_;
  // The job: written by the caller before it bumps `generation_`, read by
  // workers after they see the new generation.
  Call call_ = nullptr;
  void* ctx_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> finished_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<bool> busy_{false};
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::condition_variable wake_;
  std::exception_ptr error_;  // under mutex_
};

}  // namespace ddp
