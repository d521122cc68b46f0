// cpu_thread_pool.cpp: workers spin briefly for the next job, then sleep; a
// job is open until the caller's own share is done, and only the workers
// that joined while it was open are waited for.
#include "kernels/cpu/cpu_thread_pool.h"

#include <chrono>
#include <string>
#include <system_error>

#include "kernels/error.h"

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
// worker that keeps polling that long joins at once (a futex wake-up costs
// tens of microseconds), and one that is idle longer goes to sleep so it
// does not take a core from anyone else.
constexpr auto kWorkerSpin = std::chrono::microseconds(300);
// The caller waits only for workers that joined and are finishing a piece
// as long as its own; past this it yields, in case one lost its core.
constexpr auto kCallerSpin = std::chrono::microseconds(50);

constexpr uint64_t kClosed = uint64_t{1} << 15;
constexpr uint64_t kJoinedMask = kClosed - 1;
uint64_t ticket_of(uint64_t generation) { return generation << 16; }

}  // namespace

CpuThreadPool::CpuThreadPool(int threads) {
  try {
    for (int t = 1; t < threads; ++t) workers_.emplace_back([this] { worker_loop(); });
  } catch (const std::system_error& e) {
    // A joinable std::thread destroyed unjoined would end the process (std::terminate).
    const size_t started = workers_.size();
    stop_workers();
    throw Error("cannot start " + std::to_string(threads) + " CPU threads: the system refused thread " +
                std::to_string(started + 2) + " (" + e.code().message() + ")");
  }
}

CpuThreadPool::~CpuThreadPool() { stop_workers(); }

void CpuThreadPool::stop_workers() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true);
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  for (std::thread& w : workers_) w.join();
  workers_.clear();
}

bool CpuThreadPool::try_join(uint64_t generation) {
  uint64_t ticket = ticket_.load(std::memory_order_acquire);
  for (;;) {
    // A closed job, or a later one (this worker saw its generation late):
    // leave it to the threads already on it.
    if ((ticket & kClosed) || (ticket >> 16) != (ticket_of(generation) >> 16)) return false;
    if (ticket_.compare_exchange_weak(ticket, ticket + 1, std::memory_order_acq_rel)) return true;
  }
}

void CpuThreadPool::worker_loop() {
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
    if (!try_join(seen)) continue;
    try {
      call_(ctx_);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
    finished_.fetch_add(1, std::memory_order_acq_rel);
  }
}

void CpuThreadPool::run_erased(Call call, void* ctx) {
  bool expected = false;
  if (workers_.empty() || !busy_.compare_exchange_strong(expected, true)) return call(ctx);
  call_ = call;
  ctx_ = ctx;
  finished_.store(0, std::memory_order_relaxed);
  const uint64_t generation = generation_.load(std::memory_order_relaxed) + 1;
  ticket_.store(ticket_of(generation), std::memory_order_release);
  generation_.store(generation);  // publishes the job (seq_cst: ordered before the load below)
  if (sleepers_.load() > 0) {
    std::lock_guard<std::mutex> lock(mutex_);
    wake_.notify_all();
  }
  std::exception_ptr mine;
  try {
    call(ctx);
  } catch (...) {
    mine = std::current_exception();
  }
  const int joined = static_cast<int>(ticket_.fetch_or(kClosed, std::memory_order_acq_rel) & kJoinedMask);
  const auto spin_until = Clock::now() + kCallerSpin;
  for (int i = 0; finished_.load(std::memory_order_acquire) != joined; ++i) {
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
