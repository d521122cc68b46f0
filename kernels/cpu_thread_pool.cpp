// cpu_thread_pool.cpp: workers spin briefly for the next job, then sleep.
#include "kernels/cpu_thread_pool.h"

#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define DDP_CPU_RELAX() _mm_pause()
#else
#define DDP_CPU_RELAX() ((void)0)
#endif

namespace ddp {
namespace {

using Clock = std::chrono::steady_clock;

// A training step issues its parallel kernels a few hundred microseconds
// apart, with short single-threaded work (loss, small GEMMs) between them: a
// worker that keeps polling that long is there at once (a futex wake-up
// costs tens of microseconds), and one that is idle longer goes to sleep so
// it does not take a core from anyone else.
constexpr auto kWorkerSpin = std::chrono::microseconds(300);
// The caller waits for workers that are running the same amount of work as
// itself; past this it yields, in case a worker lost its core.
constexpr auto kCallerSpin = std::chrono::microseconds(50);

}  // namespace

CpuThreadPool::CpuThreadPool(int threads) {
  for (int t = 1; t < threads; ++t) workers_.emplace_back([this, t] { worker_loop(t); });
}

CpuThreadPool::~CpuThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true);
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  for (std::thread& w : workers_) w.join();
}

void CpuThreadPool::worker_loop(int thread_index) {
  uint64_t seen = 0;
  for (;;) {
    // Poll for a new generation, then sleep on the condition variable. The
    // caller bumps the generation and then checks `sleepers_` (both
    // sequentially consistent), so a worker about to sleep is always woken.
    const auto spin_until = Clock::now() + kWorkerSpin;
    for (int i = 0; generation_.load(std::memory_order_acquire) == seen; ++i) {
      DDP_CPU_RELAX();
      if ((i & 255) == 255 && Clock::now() > spin_until) {
        std::unique_lock<std::mutex> lock(mutex_);
        sleepers_.fetch_add(1);
        wake_.wait(lock, [&] { return generation_.load() != seen; });
        sleepers_.fetch_sub(1);
        break;
      }
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load()) return;
    try {
      call_(ctx_, thread_index);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
    finished_.fetch_add(1, std::memory_order_acq_rel);
  }
}

void CpuThreadPool::run_erased(Call call, void* ctx) {
  bool expected = false;
  if (workers_.empty() || !busy_.compare_exchange_strong(expected, true)) {
    for (int t = 0; t < size(); ++t) call(ctx, t);
    return;
  }
  call_ = call, ctx_ = ctx;
  finished_.store(0, std::memory_order_relaxed);
  generation_.fetch_add(1);  // publishes call_/ctx_ (seq_cst: ordered before the load below)
  if (sleepers_.load() > 0) {
    std::lock_guard<std::mutex> lock(mutex_);
    wake_.notify_all();
  }
  std::exception_ptr mine;
  try {
    call(ctx, 0);
  } catch (...) {
    mine = std::current_exception();
  }
  const int workers = static_cast<int>(workers_.size());
  const auto spin_until = Clock::now() + kCallerSpin;
  for (int i = 0; finished_.load(std::memory_order_acquire) != workers; ++i) {
    if ((i & 255) == 255 && Clock::now() > spin_until)
      std::this_thread::yield();
    else
      DDP_CPU_RELAX();
  }
  std::exception_ptr theirs;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    std::swap(theirs, error_);
  }
  busy_.store(false);
  if (mine) std::rethrow_exception(mine);
  if (theirs) std::rethrow_exception(theirs);
}

}  // namespace ddp
