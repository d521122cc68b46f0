// cpu_thread_pool.h: the fixed team of threads CpuBackend splits its large
// kernels over (GEMM slices, element-wise ranges).
//
// Why our own team instead of the BLAS's: the BLAS parallelises only inside
// a GEMM, and between GEMMs its idle workers spin (sched_yield) on the cores
// that our element-wise passes need. With one team for everything, each
// BLAS call runs single-threaded inside one of our threads, the conversions
// around it run in the same threads, and nobody competes for the cores.
//
// Work is cut into pieces whose boundaries depend only on the count, never
// on timing; the threads take pieces from a shared counter, so a thread that
// lost its core (the machine is shared) holds nobody up, and the caller never
// waits for a worker that has not started: it does the work itself.
#pragma once

#include <algorithm>
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
  // threads >= 1: the caller plus threads - 1 started workers. Throws
  // ddp::Error, one line saying how many started, when the system cannot
  // start them all (a process or memory limit); those started are stopped.
  explicit CpuThreadPool(int threads);
  ~CpuThreadPool();
  CpuThreadPool(const CpuThreadPool&) = delete;
  CpuThreadPool& operator=(const CpuThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Cuts [0, count) into about `pieces` contiguous ranges whose boundaries
  // are multiples of `grain`, and calls fn(begin, end) once for each, on the
  // caller and on whichever workers join in time. pieces <= 1 (or one
  // thread): a single call fn(0, count) on the caller. Returns when every
  // call has returned; rethrows the first exception.
  template <class Fn>
  void parallel_for(size_t count, size_t grain, size_t pieces, Fn&& fn) {
    if (count == 0) return;
    if (pieces <= 1 || size() == 1) return fn(size_t{0}, count);
    const size_t g = grain ? grain : 1;
    const size_t chunk = ((count + pieces - 1) / pieces + g - 1) / g * g;
    std::atomic<size_t> next{0};
    run_shared([&] {
      for (size_t begin; (begin = next.fetch_add(chunk)) < count;) fn(begin, std::min(count, begin + chunk));
    });
  }

  // Calls fn() on the caller and on every worker that picks the job up
  // before the caller's own call has returned (fn shares out its work itself,
  // e.g. through an atomic counter); returns when all those calls have
  // returned. A call from inside a running fn, or from another thread while
  // the team is busy, is a plain fn() on the caller.
  template <class Fn>
  void run_shared(Fn&& fn) {
    using F = std::remove_reference_t<Fn>;
    run_erased([](void* ctx) { (*static_cast<F*>(ctx))(); }, const_cast<void*>(static_cast<const void*>(&fn)));
  }

 private:
  using Call = void (*)(void* ctx);
  void run_erased(Call call, void* ctx);
  void worker_loop();
  bool try_join(uint64_t generation);
  // Wakes every worker to leave and joins it (the destructor, or a start that failed).
  void stop_workers();

  std::vector<std::thread> workers_;
  // The job: written by the caller before it bumps `generation_`, read by
  // the workers that join it.
  Call call_ = nullptr;
  void* ctx_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  // (generation << 16) | closed bit | number of workers that joined: a
  // worker joins with a compare-exchange while the job is open; the caller
  // closes it when its own call returns and waits for exactly those.
  std::atomic<uint64_t> ticket_{0};
  std::atomic<int> finished_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<bool> busy_{false};
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::condition_variable wake_;
  std::exception_ptr error_;  // under mutex_
};

}  // namespace ddp
