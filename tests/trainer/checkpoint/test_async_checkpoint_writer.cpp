// test_async_checkpoint_writer.cpp: the background checkpoint writer
// (--async-checkpoint): the write runs on another thread while the caller
// goes on, poll() never blocks, wait() collects it, one write at a time, a
// failed write (a real one: a file-size limit, as a full disk) is one line
// naming the step on the caller's thread and leaves the previous file,
// the destructor lets a write in flight finish, and the stop signals never
// reach the writer thread.
#include <gtest/gtest.h>

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "checkpoint_test_support.h"
#include "trainer/checkpoint/async_checkpoint_writer.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/checkpoint_dir.h"
#include "support/file_size_limit.h"

namespace ddp {
namespace {

using namespace test;  // checkpoint_test_support.h
using AsyncCheckpointWrites = CheckpointTest;

// A latch the test opens, so a write can be held in flight for as long as a
// case needs (bounded: a broken writer fails the case, not the suite).
class Gate {
 public:
  void open() { open_.store(true); }
  void pass() const {
    const auto start = std::chrono::steady_clock::now();
    while (!open_.load() && std::chrono::steady_clock::now() - start < std::chrono::seconds(20))
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

 private:
  std::atomic<bool> open_{false};
};

TEST_F(AsyncCheckpointWrites, WritesOnAnotherThreadWhileTheCallerGoesOn) {
  AsyncCheckpointWriter writer;
  Gate gate;
  std::thread::id writer_thread;
  const std::string file = path(checkpoint_file_name(3));
  writer.start(3, [&] {
    writer_thread = std::this_thread::get_id();
    gate.pass();
    write_checkpoint_atomic(file, small_state(3));
  });
  // The caller is back while the write cannot have finished.
  EXPECT_TRUE(writer.in_flight());
  EXPECT_FALSE(writer.poll().has_value());
  EXPECT_FALSE(fs::exists(file));
  gate.open();
  const auto finished = writer.wait();
  ASSERT_TRUE(finished.has_value());
  EXPECT_EQ(finished->step, 3);
  EXPECT_GE(finished->write_s, 0.0);
  EXPECT_NE(writer_thread, std::this_thread::get_id());
  EXPECT_FALSE(writer.in_flight());
  EXPECT_EQ(read_checkpoint(file).step, 3);
  EXPECT_FALSE(writer.wait().has_value()) << "nothing left to collect";
}

TEST_F(AsyncCheckpointWrites, PollCollectsAFinishedWriteOnce) {
  AsyncCheckpointWriter writer;
  writer.start(5, [] {});
  std::optional<AsyncCheckpointWriter::Finished> finished;
  const auto start = std::chrono::steady_clock::now();
  while (!finished && std::chrono::steady_clock::now() - start < std::chrono::seconds(20)) finished = writer.poll();
  ASSERT_TRUE(finished.has_value());
  EXPECT_EQ(finished->step, 5);
  EXPECT_FALSE(writer.poll().has_value());
  EXPECT_FALSE(writer.in_flight());
}

TEST_F(AsyncCheckpointWrites, OneWriteInFlightAtATime) {
  AsyncCheckpointWriter writer;
  Gate gate;
  writer.start(1, [&] { gate.pass(); });
  EXPECT_THROW(writer.start(2, [] {}), Error);
  gate.open();
  EXPECT_EQ(writer.wait()->step, 1);
  writer.start(2, [] {});
  EXPECT_EQ(writer.wait()->step, 2);
}

// A write that fails on the writer thread is the caller's error at the
// wait, in one line that names the step and the file's own problem; the
// previous checkpoint stays and no temporary file is left.
TEST_F(AsyncCheckpointWrites, AFailedWriteIsRethrownAtTheWaitInOneLine) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  const std::string old_file = path(checkpoint_file_name(2));
  write_checkpoint_atomic(old_file, small_state(2));
  TrainState big = random_state(rng_, 200);
  reshape_model(big, {400, 500}, 1.0f);  // > 1.6 MB: far beyond the limit
  big.step = 4;
  const std::string file = path(checkpoint_file_name(4));
  AsyncCheckpointWriter writer;
  std::string message;
  {
    test::FileSizeLimit limit(64 * 1024);
    writer.start(4, [&] { write_checkpoint_atomic(file, big); });
    try {
      writer.wait();
      ADD_FAILURE() << "the write under a 64 KiB file-size limit did not fail";
    } catch (const Error& e) {
      message = e.what();
    }
  }
  EXPECT_TRUE(contains(message, "the checkpoint of step 4, written in the background (--async-checkpoint), failed: "))
      << message;
  EXPECT_TRUE(contains(message, "cannot write checkpoint " + file)) << message;
  EXPECT_TRUE(contains(message, std::strerror(EFBIG))) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_FALSE(writer.in_flight());
  EXPECT_EQ(file_names_in(dir_), std::set<std::string>{checkpoint_file_name(2)});
  expect_same_state(small_state(2), read_checkpoint(old_file));
}

// A run that ends by an exception still finishes the write it started.
TEST_F(AsyncCheckpointWrites, TheDestructorLetsAWriteInFlightFinish) {
  const std::string file = path(checkpoint_file_name(7));
  {
    AsyncCheckpointWriter writer;
    writer.start(7, [&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      write_checkpoint_atomic(file, small_state(7));
    });
  }
  EXPECT_EQ(read_checkpoint(file).step, 7);
}

// SIGINT and SIGTERM are blocked on the writer thread, so the handler (and
// a blocking call's EINTR) stays the training thread's business; the
// caller's own mask is as it was.
TEST_F(AsyncCheckpointWrites, StopSignalsAreBlockedOnTheWriterThreadOnly) {
  AsyncCheckpointWriter writer;
  sigset_t in_writer;
  sigemptyset(&in_writer);
  writer.start(1, [&] { pthread_sigmask(SIG_BLOCK, nullptr, &in_writer); });
  writer.wait();
  EXPECT_EQ(sigismember(&in_writer, SIGINT), 1);
  EXPECT_EQ(sigismember(&in_writer, SIGTERM), 1);
  sigset_t in_caller;
  pthread_sigmask(SIG_BLOCK, nullptr, &in_caller);
  EXPECT_EQ(sigismember(&in_caller, SIGTERM), 0);
  EXPECT_EQ(sigismember(&in_caller, SIGINT), 0);
}

}  // namespace
}  // namespace ddp
