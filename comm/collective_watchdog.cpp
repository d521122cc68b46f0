// collective_watchdog.cpp
#include "comm/collective_watchdog.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace ddp {
namespace {
using Clock = std::chrono::steady_clock;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}
}  // namespace

CollectiveWatchdog::CollectiveWatchdog(double timeout_s, OnExpire on_expire, double poll_s)
    : timeout_s_(timeout_s),
      poll_s_(std::max(1e-3, std::min(poll_s, timeout_s / 2))),
      on_expire_(std::move(on_expire)) {
  thread_ = std::thread([this] { thread_main(); });
}

CollectiveWatchdog::~CollectiveWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void CollectiveWatchdog::enter(const char* what, int64_t step) noexcept {
  generation_.fetch_add(1, std::memory_order_relaxed);
  since_ns_.store(now_ns(), std::memory_order_relaxed);
  step_.store(step, std::memory_order_relaxed);
  what_.store(what, std::memory_order_release);
}

void CollectiveWatchdog::leave() noexcept { what_.store(nullptr, std::memory_order_release); }

std::string CollectiveWatchdog::message(const char* what, int64_t step, double timeout_s) {
  char text[256];
  std::snprintf(text, sizeof text,
                "%s of step %lld did not finish within %g s (--collective-timeout); a peer may have stalled or "
                "died; aborting",
                what, static_cast<long long>(step), timeout_s);
  return text;
}

void CollectiveWatchdog::thread_main() {
  const auto poll = std::chrono::duration<double>(poll_s_);
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    if (wake_.wait_for(lock, poll, [this] { return stopping_; })) return;
    const uint64_t generation = generation_.load(std::memory_order_acquire);
    const char* what = what_.load(std::memory_order_acquire);
    if (what == nullptr) continue;
    const int64_t since = since_ns_.load(std::memory_order_relaxed);
    const int64_t step = step_.load(std::memory_order_relaxed);
    if (generation_.load(std::memory_order_acquire) != generation || what_.load(std::memory_order_acquire) != what)
      continue;  // a new collective began while we read: look again next round
    if (static_cast<double>(now_ns() - since) * 1e-9 <= timeout_s_) continue;
    lock.unlock();
    on_expire_(message(what, step, timeout_s_));
    return;  // on_expire normally ends the process; if not, watch no more
  }
}

}  // namespace ddp
