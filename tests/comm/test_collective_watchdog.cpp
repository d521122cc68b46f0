// test_collective_watchdog.cpp: the watchdog fires once, with the line that
// names the collective and its step, for a collective that outlasts the
// timeout, and never for collectives that finish in time.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>

#include "comm/collective_watchdog.h"

namespace ddp {
namespace {
using namespace std::chrono_literals;

struct Expiries {
  std::mutex mutex;
  std::vector<std::string> messages;
  CollectiveWatchdog::OnExpire callback() {
    return [this](const std::string& m) {
      std::lock_guard<std::mutex> lock(mutex);
      messages.push_back(m);
    };
  }
  std::vector<std::string> seen() {
    std::lock_guard<std::mutex> lock(mutex);
    return messages;
  }
};

TEST(CollectiveWatchdog, FiresOnceForAnOverdueCollective) {
  Expiries e;
  CollectiveWatchdog dog(0.2, e.callback(), 0.02);
  {
    CollectiveWatch watch(&dog, "all-reduce", 12);
    std::this_thread::sleep_for(600ms);
  }
  const auto seen = e.seen();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0],
            "all-reduce of step 12 did not finish within 0.2 s (--collective-timeout); a peer may have "
            "stalled or died; aborting");
}

TEST(CollectiveWatchdog, QuietWhileCollectivesFinishInTime) {
  Expiries e;
  CollectiveWatchdog dog(0.25, e.callback(), 0.01);
  const auto start = std::chrono::steady_clock::now();
  for (int64_t step = 1; std::chrono::steady_clock::now() - start < 700ms; ++step) {
    CollectiveWatch watch(&dog, "host all-reduce", step);
    std::this_thread::sleep_for(5ms);
  }
  std::this_thread::sleep_for(400ms);  // idle (no collective) for longer than the timeout
  EXPECT_TRUE(e.seen().empty()) << e.seen().front();
}

TEST(CollectiveWatchdog, NullWatchdogIsANoOp) { CollectiveWatch watch(nullptr, "barrier", 1); }

}  // namespace
}  // namespace ddp
