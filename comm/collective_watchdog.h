// collective_watchdog.h: a thread that notices a collective which has waited
// too long for its peers (one of them stalled, or died without the launcher
// noticing) and ends the job instead of letting every rank hang.
//
// The main thread marks each blocking collective with enter()/leave() (or a
// CollectiveWatch scope): three atomic stores, no lock, no system call. The
// watchdog wakes about once a second; when the marked collective has lasted
// longer than the timeout it calls `on_expire` once with one line such as
//   "all-reduce of step 12 did not finish within 5 s; a peer may have
//    stalled or died; aborting"
// on its own thread. on_expire is expected to end the process (print, abort
// the NCCL communicator, MPI_Abort); if it returns, the watchdog stops.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace ddp {

class CollectiveWatchdog {
 public:
  using OnExpire = std::function<void(const std::string& message)>;

  // timeout_s > 0. poll_s: how often the thread looks (at most timeout_s / 2).
  CollectiveWatchdog(double timeout_s, OnExpire on_expire, double poll_s = 1.0);
  ~CollectiveWatchdog();  // stops and joins the thread
  CollectiveWatchdog(const CollectiveWatchdog&) = delete;
  CollectiveWatchdog& operator=(const CollectiveWatchdog&) = delete;

  // `what` names the collective ("all-reduce", "broadcast") and must outlive
  // the call (a string literal); `step` is the 1-based step it belongs to.
  void enter(const char* what, int64_t step) noexcept;
  void leave() noexcept;
  double timeout_s() const { return timeout_s_; }

  // The line on_expire receives (exposed for tests).
  static std::string message(const char* what, int64_t step, double timeout_s);

 private:
  void thread_main();

  const double timeout_s_, poll_s_;
  OnExpire on_expire_;
  // Written by the main thread only. enter() stores since_ns_ and step_
  // before what_ (release), so a watchdog that reads what_ (acquire) sees a
  // start time at least as recent as that collective's: it can under-, never
  // over-estimate the wait. generation_ detects a name/step pair torn by a
  // concurrent enter(); such a round is skipped.
  std::atomic<uint64_t> generation_{0};
  std::atomic<const char*> what_{nullptr};
  std::atomic<int64_t> step_{0};
  std::atomic<int64_t> since_ns_{0};

  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;  // last: started once the rest exists
};

// Marks a blocking collective for the lifetime of the scope; a null watchdog
// makes it a no-op.
class CollectiveWatch {
 public:
  CollectiveWatch(CollectiveWatchdog* dog, const char* what, int64_t step) noexcept : dog_(dog) {
    if (dog_) dog_->enter(what, step);
  }
  ~CollectiveWatch() {
    if (dog_) dog_->leave();
  }
  CollectiveWatch(const CollectiveWatch&) = delete;
  CollectiveWatch& operator=(const CollectiveWatch&) = delete;

 private:
  CollectiveWatchdog* dog_;
};

}  // namespace ddp
