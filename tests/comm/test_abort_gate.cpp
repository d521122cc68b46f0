// test_abort_gate.cpp: the locking policy between calls on an NCCL
// communicator and the watchdog's abort (comm/abort_gate.h), on a plain
// handle so it runs without NCCL: an abort never releases the handle under a
// call in progress, never waits forever for one that does not return, and
// every call after it throws instead of using the handle.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <string>
#include <thread>

#include "comm/abort_gate.h"
#include "kernels/error.h"
#include "support/test_support.h"

namespace ddp {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Spins (with short sleeps) until `flag` is set; a test that waits longer
// than a few seconds has failed anyway.
void wait_for(const std::atomic<bool>& flag) {
  const auto give_up = Clock::now() + 5s;
  while (!flag.load() && Clock::now() < give_up) std::this_thread::sleep_for(1ms);
  ASSERT_TRUE(flag.load()) << "the other thread never got there";
}

// The watchdog fires while the training thread is between its liveness
// check and the end of its call: the release must wait for the call.
TEST(AbortGate, AbortWaitsForTheCallInProgress) {
  AbortGate gate("test handle");
  std::atomic<bool> inside{false}, call_done{false};
  std::thread caller([&] {
    AbortGate::Pass pass = gate.enter("call");
    inside = true;
    std::this_thread::sleep_for(100ms);  // the call, e.g. ncclAllReduce
    call_done = true;
  });
  wait_for(inside);
  bool call_was_done_at_release = false;
  const AbortGate::AbortOutcome outcome = gate.abort(5s, [&] { call_was_done_at_release = call_done.load(); });
  caller.join();
  EXPECT_EQ(outcome, AbortGate::AbortOutcome::kReleased);
  EXPECT_TRUE(call_was_done_at_release) << "the handle was released while a call was using it";
}

// A call that never returns (a blocking NCCL call waiting for a dead peer):
// the abort gives up after its wait, releases nothing, and the caller's next
// call throws.
TEST(AbortGate, AbortGivesUpOnACallThatDoesNotReturn) {
  AbortGate gate("test handle");
  std::atomic<bool> inside{false}, let_go{false};
  std::thread caller([&] {
    {
      AbortGate::Pass pass = gate.enter("stuck call");
      inside = true;
      while (!let_go.load()) std::this_thread::sleep_for(1ms);
    }
    EXPECT_THROW(gate.enter("next call"), Error);
  });
  wait_for(inside);
  bool released = false;
  const auto start = Clock::now();
  const AbortGate::AbortOutcome outcome = gate.abort(50ms, [&] { released = true; });
  const double waited_s = std::chrono::duration<double>(Clock::now() - start).count();
  let_go = true;
  caller.join();
  EXPECT_EQ(outcome, AbortGate::AbortOutcome::kCallInProgress);
  EXPECT_FALSE(released) << "the handle was released under a call in progress";
  EXPECT_GE(waited_s, 0.045);
  EXPECT_LT(waited_s, 2.0) << "the abort waited far past its bound";
  EXPECT_TRUE(gate.aborted());
  EXPECT_FALSE(gate.close([&] { released = true; })) << "the owner must not release what an abort gave up on";
  EXPECT_FALSE(released);
}

TEST(AbortGate, CallsAfterAnAbortThrowNamingTheCallAndReleaseRunsOnce) {
  AbortGate gate("NCCL communicator");
  int releases = 0;
  EXPECT_EQ(gate.abort(1s, [&] { ++releases; }), AbortGate::AbortOutcome::kReleased);
  EXPECT_EQ(gate.abort(1s, [&] { ++releases; }), AbortGate::AbortOutcome::kAlreadyAborted);
  EXPECT_FALSE(gate.close([&] { ++releases; }));
  EXPECT_EQ(releases, 1);
  try {
    gate.enter("allreduce_sum_lowp");
    FAIL() << "a call after the abort was let through";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "allreduce_sum_lowp on an aborted NCCL communicator");
  }
}

TEST(AbortGate, CloseWithoutAbortReleasesOnceAndLetsNoCallThrough) {
  AbortGate gate("test handle");
  int releases = 0;
  { AbortGate::Pass pass = gate.enter("call"); }  // a call before the end
  EXPECT_TRUE(gate.close([&] { ++releases; }));
  EXPECT_EQ(gate.abort(10ms, [&] { ++releases; }), AbortGate::AbortOutcome::kAlreadyAborted);
  EXPECT_EQ(releases, 1);
  EXPECT_THROW(gate.enter("call"), Error);
}

// Many short calls with an abort at a random moment among them: every call
// that got in finds the handle alive for its whole length, and every call
// after the abort throws.
TEST(AbortGate, NoCallEverSeesTheHandleReleasedUnderIt) {
  std::mt19937_64 rng(test::test_seed());
  for (int trial = 0; trial < 20; ++trial) {
    AbortGate gate("test handle");
    std::atomic<bool> handle_alive{true}, started{false};
    std::atomic<int> torn_calls{0}, calls_after_abort{0};
    std::thread caller([&] {
      for (int i = 0; i < 100000; ++i) {
        try {
          AbortGate::Pass pass = gate.enter("call");
          started = true;
          if (!handle_alive.load()) ++calls_after_abort;
          std::this_thread::yield();  // the call's length: room for an abort to land
          if (!handle_alive.load()) ++torn_calls;
        } catch (const Error&) {
          return;
        }
      }
    });
    wait_for(started);
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 2000));
    const AbortGate::AbortOutcome outcome = gate.abort(5s, [&] { handle_alive = false; });
    caller.join();
    EXPECT_EQ(outcome, AbortGate::AbortOutcome::kReleased);
    EXPECT_EQ(torn_calls.load(), 0) << "trial " << trial << ": a call saw the handle released in its middle";
    EXPECT_EQ(calls_after_abort.load(), 0) << "trial " << trial << ": a call was let in after the release";
  }
}

}  // namespace
}  // namespace ddp
