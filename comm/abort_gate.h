// abort_gate.h: makes the calls one thread makes on a handle (an NCCL
// communicator, on the training thread) and that handle's abort from another
// thread (the collective watchdog) mutually exclusive, with an abort that
// never waits forever.
//
// NCCL forbids two threads to use one communicator at the same time, and an
// abort frees it: an abort that lands between a caller's "still alive?"
// check and its ncclAllReduce would hand NCCL a freed communicator. So each
// call holds the gate from its check to the end of the call, and the abort
// takes the gate before it releases the handle.
//
// The abort waits for the gate a bounded time only. A call on a blocking
// NCCL communicator can itself block on a missing peer (the first collective
// of a kind connects to its peers, and waits for them), and then it would
// never let go: the abort gives up after `wait`, leaves the handle to the
// end of the process (the caller ends the job next, e.g. MPI_Abort) and
// still marks it aborted, so the call's next entry throws instead of using
// it. Callers must not hold the gate while they wait for the device (a host
// sync on a stream that runs the handle's kernels): that is where the abort
// is needed most.
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>

#include "kernels/error.h"

namespace ddp {

class AbortGate {
 public:
  // `handle_name` ends the error a call after the abort gets:
  // "<what> on an aborted <handle_name>".
  explicit AbortGate(std::string handle_name) : handle_name_(std::move(handle_name)) {}
  AbortGate(const AbortGate&) = delete;
  AbortGate& operator=(const AbortGate&) = delete;

  // Held for one call on the handle: the liveness check and the call itself.
  using Pass = std::unique_lock<std::timed_mutex>;

  // Waits while an abort is releasing the handle (that is bounded: the
  // release does not wait for this thread), then throws ddp::Error naming
  // `what` if the handle was aborted.
  Pass enter(const char* what) {
    Pass pass(mutex_);
    if (aborted_.load()) throw Error(std::string(what) + " on an aborted " + handle_name_);
    return pass;
  }

  enum class AbortOutcome {
    kReleased,        // release() ran, with no call in progress
    kAlreadyAborted,  // an earlier abort (or close) came first; nothing ran
    kCallInProgress,  // a call held the gate for longer than `wait`: marked aborted, release() skipped
  };

  // From any thread. Marks the handle aborted, so every later enter()
  // throws, and runs `release` (which must not throw) once no call is in
  // progress, if that happens within `wait`. Runs release at most once over
  // all aborts and close().
  template <class Release>
  AbortOutcome abort(std::chrono::milliseconds wait, Release&& release) noexcept {
    Pass pass(mutex_, std::defer_lock);
    if (!pass.try_lock_for(wait)) {
      // The holder is inside a call that does not return; releasing the
      // handle under it is what the gate exists to prevent.
      return aborted_.exchange(true) ? AbortOutcome::kAlreadyAborted : AbortOutcome::kCallInProgress;
    }
    if (aborted_.exchange(true)) return AbortOutcome::kAlreadyAborted;
    release();
    return AbortOutcome::kReleased;
  }

  // The owner's end of the handle (its destructor): waits for an abort in
  // progress, then runs `release` unless an abort came first. Returns
  // whether it ran.
  template <class Release>
  bool close(Release&& release) noexcept {
    Pass pass(mutex_);
    if (aborted_.exchange(true)) return false;
    release();
    return true;
  }

  bool aborted() const noexcept { return aborted_.load(); }

 private:
  const std::string handle_name_;
  // timed: the abort's bounded wait. Held only for calls that queue work,
  // never across a wait for the device.
  std::timed_mutex mutex_;
  std::atomic<bool> aborted_{false};
};

}  // namespace ddp
