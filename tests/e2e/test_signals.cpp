// test_signals.cpp: SIGINT, SIGTERM (and SIGUSR1 through mpirun) in every phase of a run, as a user
// meets them (the step-boundary stop itself is in test_faults_processes.cpp):
//   start-up (blocked opening a FIFO, reading a large data file): the process
//     ends at once with 128 + signal and one line, having trained nothing;
//   an epoch's evaluation: the stop comes right after it, at that step;
//   the final evaluation and the final checkpoint write: they finish, the
//     directory resumes, and the exit status is still 128 + signal, on one
//     rank and when one rank of two is signalled.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "child_process.h"
#include "faults_support.h"
#include "support/cli_test.h"
#include "support/test_support.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/checkpoint_dir.h"
#include "trainer/io/npy_io.h"

namespace ddp {
namespace {
namespace fs = std::filesystem;
using test::Child;
using test::exit_code;
using test::lines_with;

using test::kTrainer;
#if defined(DDP_MPIEXEC)
using test::mpiexec_prefix;
#endif
const std::string kStartUpLine = "ddp_train: stopped by SIGTERM during start-up; nothing was trained or written";

// Waits (up to timeout_s) until the child is ddp_train with its SIGTERM
// handler in place, or has ended; true in the first case.
bool wait_until_catching(Child& child, double timeout_s) {
  const auto start = std::chrono::steady_clock::now();
  while (test::seconds_since(start) < timeout_s && !child.poll_exit()) {
    if (test::ddp_train_catches(child.pid(), SIGTERM)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

// An MSE problem as .npy files: `train` samples to learn from and `test`
// samples whose evaluation, through a wide model, takes a noticeable while.
std::string npy_problem(const std::string& dir, int64_t train, int64_t test, int64_t in, int64_t out) {
  std::mt19937_64 rng(test::test_seed());
  auto write = [&](const std::string& name, int64_t rows, int64_t cols) {
    const std::vector<float> v = test::random_floats(rng, static_cast<size_t>(rows * cols));
    save_npy_fp32(dir + "/" + name, v.data(), {static_cast<size_t>(rows), static_cast<size_t>(cols)});
  };
  write("train_x.npy", train, in);
  write("train_y.npy", train, out);
  write("test_x.npy", test, in);
  write("test_y.npy", test, out);
  return " --data npy --loss mse --train-x " + dir + "/train_x.npy --train-y " + dir + "/train_y.npy --test-x " + dir +
         "/test_x.npy --test-y " + dir + "/test_y.npy";
}

// 3 steps of 32 samples from 4096 (no epoch ends), then a final evaluation
// of 16384 samples through 1024-wide layers (seconds on one thread).
const std::string kSlowFinalEval = " --layers 32,1024,1024,8 --batch-size 32 --steps 3 --log-every 1";

class Signals : public test::CliTest {
 protected:
  Signals() : CliTest("signals") {}
};

// ---- start-up ------------------------------------------------------------------------------

// open(2) of a FIFO blocks until a writer comes, which here never does.
// Either the reader refuses the FIFO (a one-line error naming it) or the
// signal ends the blocked process; never does it stay blocked or train.
TEST_F(Signals, SigtermWhileBlockedOpeningAFifoEndsAtOnce) {
  const std::string fifo = dir + "/train.csv";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  std::ofstream(dir + "/test.csv") << "a,b,label\n1,2,0\n3,4,1\n";
  Child child(kTrainer + " --data csv --train-csv " + fifo + " --test-csv " + dir +
                  "/test.csv --layers 2,2 --steps 5 --checkpoint-dir " + dir + "/ck",
              dir + "/out");
  if (wait_until_catching(child, 10)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // into open(2)
    kill(child.pid(), SIGTERM);
  }
  const auto status = child.wait_exit(5);
  ASSERT_TRUE(status.has_value()) << "still running 5 s after SIGTERM during start-up:\n" << child.output();
  const std::string out = child.output();
  if (exit_code(*status) == 128 + SIGTERM) {
    EXPECT_EQ(lines_with(out, kStartUpLine).size(), 1u) << out;
  } else {
    EXPECT_EQ(exit_code(*status), 1) << out;
    const auto errors = lines_with(out, "ddp_train: error");
    ASSERT_EQ(errors.size(), 1u) << out;
    EXPECT_NE(errors[0].find(fifo), std::string::npos) << errors[0];
  }
  EXPECT_EQ(out.find("samples/s"), std::string::npos) << "it trained:\n" << out;
  EXPECT_FALSE(fs::exists(dir + "/ck")) << "it wrote a checkpoint";
}

// A CSV problem whose training file (200000 rows) takes a while to read.
std::string large_csv_problem(const std::string& dir) {
  std::mt19937_64 rng(test::test_seed());
  std::uniform_real_distribution<float> value(-1, 1);
  std::ofstream csv(dir + "/train.csv");
  csv << "a,b,c,d,e,f,g,h,label\n";
  for (int row = 0; row < 200000; ++row) {
    for (int col = 0; col < 8; ++col) csv << value(rng) << ',';
    csv << row % 4 << '\n';
  }
  std::ofstream(dir + "/test.csv") << "a,b,c,d,e,f,g,h,label\n1,2,3,4,5,6,7,8,0\n";
  return " --data csv --train-csv " + dir + "/train.csv --test-csv " + dir +
         "/test.csv --layers 8,4 --steps 5 --log-every 1 --checkpoint-dir " + dir + "/ck";
}

// SIGTERM while a large CSV loads (the process has it open): the process
// ends with 143 and the start-up line, before any step.
TEST_F(Signals, SigtermWhileReadingALargeDataFileEndsAtOnce) {
  Child child(kTrainer + large_csv_problem(dir), dir + "/out");
  const std::string csv = fs::canonical(dir + "/train.csv").string();
  const auto start = std::chrono::steady_clock::now();
  while (!test::has_open(child.pid(), csv) && test::seconds_since(start) < 10 && !child.poll_exit())
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(test::has_open(child.pid(), csv)) << "never saw it reading " << csv << ":\n" << child.output();
  kill(child.pid(), SIGTERM);
  const auto status = child.wait_exit(5);
  ASSERT_TRUE(status.has_value()) << "still running 5 s after SIGTERM during start-up:\n" << child.output();
  const std::string out = child.output();
  EXPECT_EQ(exit_code(*status), 128 + SIGTERM) << out;
  EXPECT_EQ(lines_with(out, kStartUpLine).size(), 1u) << out;
  EXPECT_EQ(out.find("samples/s"), std::string::npos) << "it trained:\n" << out;
  EXPECT_EQ(out.find("stopped by SIGTERM at step"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir + "/ck")) << "it wrote a checkpoint";
}

// SIGTERM to rank 1 alone while both ranks read a large CSV: it ends at
// once, mpiexec ends the job with its 143, and no rank trains.
TEST_F(Signals, SigtermToOneRankDuringStartUpEndsTheJob) {
#if !defined(DDP_MPIEXEC)
  GTEST_SKIP() << "built without MPI";
#else
  Child child(mpiexec_prefix(2) + kTrainer + large_csv_problem(dir), dir + "/out");
  pid_t rank1 = 0;
  const auto start = std::chrono::steady_clock::now();
  while (rank1 == 0 && test::seconds_since(start) < 20 && !child.poll_exit()) {
    const std::vector<pid_t> ranks = test::children_of(child.pid());
    if (ranks.size() == 2 && test::ddp_train_catches(ranks.back(), SIGTERM)) rank1 = ranks.back();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_NE(rank1, 0) << child.output();
  kill(rank1, SIGTERM);
  const auto status = child.wait_exit(10);
  ASSERT_TRUE(status.has_value()) << "mpiexec still running 10 s after SIGTERM to a starting rank:\n" << child.output();
  const std::string out = child.output();
  EXPECT_EQ(exit_code(*status), 128 + SIGTERM) << out;
  EXPECT_GE(lines_with(out, kStartUpLine).size(), 1u) << out;
  EXPECT_EQ(out.find("samples/s"), std::string::npos) << "it trained:\n" << out;
  EXPECT_FALSE(fs::exists(dir + "/ck")) << "it wrote a checkpoint";
#endif
}

// ---- evaluations -----------------------------------------------------------------------------

// SIGTERM during the evaluation at the end of epoch 1 (step 2): the stop
// comes at that step, right after the evaluation, not steps later.
TEST_F(Signals, SigtermDuringAnEpochEvaluationStopsRightAfterIt) {
  const std::string data = npy_problem(dir, 64, 16384, 32, 8);
  Child child(kTrainer + data +
                  " --layers 32,1024,1024,8 --batch-size 32 --steps 1000 --log-every 1 --checkpoint-dir " + dir + "/ck",
              dir + "/out");
  // The step's progress line is the last thing the trainer prints before it
  // evaluates (trainer/loop/trainer.cpp, Trainer::Impl::run: report_progress,
  // then run_eval), so the signal lands as the evaluation starts; a stop is
  // only read at the agreed point after it. Waiting for the line, not
  // sleeping, keeps this true on a loaded machine.
  ASSERT_TRUE(child.wait_for_output("step 2/1000 ", 60)) << child.output();
  kill(child.pid(), SIGTERM);
  const auto status = child.wait_exit(30);
  ASSERT_TRUE(status.has_value()) << child.output();
  const std::string out = child.output();
  EXPECT_EQ(exit_code(*status), 128 + SIGTERM) << out;
  EXPECT_EQ(lines_with(out, "epoch 1/500 (step 2): test loss").size(), 1u) << "the evaluation was cut:\n" << out;
  EXPECT_EQ(lines_with(out, "stopped by SIGTERM at step 2 (checkpoint ").size(), 1u) << out;
  EXPECT_EQ(out.find("step 3/1000"), std::string::npos) << "it trained on after the evaluation:\n" << out;
}

// SIGTERM during the final evaluation: it finishes, the checkpoint is
// written, and the exit status still says the signal came.
TEST_F(Signals, SigtermDuringTheFinalEvaluationStillExits143) {
  const std::string ck = dir + "/ck";
  Child child(kTrainer + npy_problem(dir, 4096, 16384, 32, 8) + kSlowFinalEval + " --checkpoint-dir " + ck,
              dir + "/out");
  // As above: the last step's line comes right before the final evaluation.
  ASSERT_TRUE(child.wait_for_output("step 3/3 ", 60)) << child.output();
  kill(child.pid(), SIGTERM);
  const auto status = child.wait_exit(60);
  ASSERT_TRUE(status.has_value()) << child.output();
  const std::string out = child.output();
  EXPECT_EQ(exit_code(*status), 128 + SIGTERM) << out;
  EXPECT_EQ(lines_with(out, "(step 3): test loss").size(), 1u) << out;
  const std::string file = ck + "/" + checkpoint_file_name(3);
  EXPECT_EQ(lines_with(out, "SIGTERM came while the run was finishing: it finished at step 3 (checkpoint " + file + ")")
                .size(),
            1u)
      << out;
  EXPECT_EQ(read_checkpoint(file).step, 3);
}

// ---- the final checkpoint write --------------------------------------------------------------

// SIGTERM while the final checkpoint of a large model is being written (its
// temporary file seen in the directory): the write completes, the earlier
// checkpoint is whole, the run resumes from the final one, and the exit
// status is 143.
TEST_F(Signals, SigtermDuringTheFinalCheckpointWriteKeepsTheDirectoryResumable) {
  const std::string ck = dir + "/ck";
  // 4.2 M parameters: a 34 MB checkpoint, written and synced over tens of ms at least.
  const std::string run = kTrainer + " --data synthetic --layers 10,2048,2048,10 --log-every 1 --checkpoint-dir " + ck;
  const auto first = test::run_command(run + " --steps 2 --stop-after-steps 1 2>&1");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const std::string earlier = ck + "/" + checkpoint_file_name(1), final_file = ck + "/" + checkpoint_file_name(2);

  Child child(run + " --steps 2 --resume", dir + "/out");
  bool signalled = false;
  while (!signalled && !child.poll_exit()) {
    std::error_code ec;  // the directory changes under the listing
    for (fs::directory_iterator it(ck, ec), end; !ec && it != end; it.increment(ec))
      if (it->path().filename().string().rfind(checkpoint_file_name(2) + ".tmp", 0) == 0) signalled = true;
    if (signalled) kill(child.pid(), SIGTERM);
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  ASSERT_TRUE(signalled) << "the final write ended before its temporary file was seen:\n" << child.output();
  const auto status = child.wait_exit(60);
  ASSERT_TRUE(status.has_value()) << child.output();
  const std::string out = child.output();
  EXPECT_EQ(exit_code(*status), 128 + SIGTERM) << out;
  EXPECT_EQ(
      lines_with(out, "SIGTERM came while the run was finishing: it finished at step 2 (checkpoint " + final_file + ")")
          .size(),
      1u)
      << out;
  EXPECT_EQ(read_checkpoint(earlier).step, 1);
  EXPECT_EQ(read_checkpoint(final_file).step, 2);
  const CheckpointScan scan = find_newest_valid_checkpoint(ck);
  EXPECT_EQ(scan.newest_valid, final_file);
  EXPECT_TRUE(scan.skipped.empty()) << scan.skipped.front().first;
  const auto resumed = test::run_command(run + " --steps 3 --resume 2>&1");
  EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from " + final_file + " at step 2"), std::string::npos) << resumed.output;
}

// ---- two ranks -----------------------------------------------------------------------------------

// SIGTERM to rank 1 alone during the final evaluation: both ranks finish it
// (a rank that left a collective early would hang its peer), agree on the
// signal afterwards, rank 0 says so once, and mpiexec exits with 143.
TEST_F(Signals, SigtermToOneRankDuringTheFinalEvaluationIsAgreed) {
#if !defined(DDP_MPIEXEC)
  GTEST_SKIP() << "built without MPI";
#else
  const std::string ck = dir + "/ck";
  Child child(
      mpiexec_prefix(2) + kTrainer + npy_problem(dir, 4096, 32768, 32, 8) + kSlowFinalEval + " --checkpoint-dir " + ck,
      dir + "/out");
  ASSERT_TRUE(child.wait_for_output("step 3/3 ", 60)) << child.output();
  const std::vector<pid_t> ranks = test::children_of(child.pid());
  ASSERT_EQ(ranks.size(), 2u) << child.output();
  kill(ranks.back(), SIGTERM);  // rank 0 printed its last step's line: the final evaluation is starting
  const auto status = child.wait_exit(60);
  ASSERT_TRUE(status.has_value()) << "mpiexec still running 60 s after SIGTERM to one rank:\n" << child.output();
  const std::string out = child.output();
  EXPECT_EQ(exit_code(*status), 128 + SIGTERM) << out;
  EXPECT_EQ(lines_with(out, "(step 3): test loss").size(), 1u) << out;
  EXPECT_EQ(lines_with(out, "SIGTERM came while the run was finishing: it finished at step 3").size(), 1u) << out;
  EXPECT_EQ(read_checkpoint(ck + "/" + checkpoint_file_name(3)).step, 3);
#endif
}

// SIGUSR1 to a plain mpirun (Open MPI's default odls_base_sigkill_timeout,
// 1 s): mpirun passes it to both ranks at once and kills nothing, so the
// stop checkpoint is written although its write takes 3 s
// (DDP_TEST_CHECKPOINT_WRITE=slow), more than the 2 s a SIGTERM to mpirun
// leaves the ranks before SIGKILL. The directory resumes from it.
TEST_F(Signals, Sigusr1ToAPlainMpirunStopsWithACheckpointWhateverTheKillTimeout) {
#if !defined(DDP_MPIEXEC)
  GTEST_SKIP() << "built without MPI";
#else
  const std::string ck = dir + "/ck";
  const std::string data = npy_problem(dir, 4096, 64, 32, 8);
  Child child("env DDP_TEST_CHECKPOINT_WRITE=slow:1 " + mpiexec_prefix(2) + kTrainer + data +
                  " --layers 32,64,8 --batch-size 32 --steps 1000000 --log-every 1 --checkpoint-dir " + ck,
              dir + "/out");
  ASSERT_TRUE(child.wait_for_output("step 3/", 60)) << child.output();
  kill(child.pid(), SIGUSR1);
  const auto status = child.wait_exit(60);
  ASSERT_TRUE(status.has_value()) << "mpiexec still running 60 s after SIGUSR1:\n" << child.output();
  const std::string out = child.output();
  EXPECT_NE(exit_code(*status), 0) << out;
  const std::vector<std::string> stopped = lines_with(out, "stopped by SIGUSR1 at step ");
  ASSERT_EQ(stopped.size(), 1u) << out;
  const CheckpointScan scan = find_newest_valid_checkpoint(ck);
  ASSERT_FALSE(scan.newest_valid.empty()) << out;
  EXPECT_NE(stopped.front().find(scan.newest_valid), std::string::npos) << stopped.front();
  const test::CommandResult resumed =
      test::run_command(kTrainer + data + " --layers 32,64,8 --batch-size 32 --steps " +
                        std::to_string(read_checkpoint(scan.newest_valid).step + 1) + " --checkpoint-dir " + ck +
                        " --resume 2>&1");
  EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
#endif
}

// A checkpoint write longer than the seconds a SIGTERM to mpirun leaves the
// ranks (Open MPI's default odls_base_sigkill_timeout, 1 s) is said once, with
// the ways out; with a timeout that covers it, nothing is said.
TEST_F(Signals, ACheckpointLongerThanMpirunsKillTimeoutIsSaid) {
#if !defined(DDP_MPIEXEC)
  GTEST_SKIP() << "built without MPI";
#else
  const std::string data = npy_problem(dir, 256, 64, 32, 8);
  const std::string run = mpiexec_prefix(2) + kTrainer + data + " --layers 32,64,8 --batch-size 32 --steps 2";
  const test::CommandResult short_grace = test::run_command("env -u OMPI_MCA_odls_base_sigkill_timeout "
                                                            "DDP_TEST_CHECKPOINT_WRITE=slow:1 " + run +
                                                            " --checkpoint-every 1 --checkpoint-dir " + dir + "/a 2>&1");
  ASSERT_EQ(short_grace.exit_code, 0) << short_grace.output;
  const std::vector<std::string> notes = lines_with(short_grace.output, "note: this checkpoint took 3.");
  ASSERT_EQ(notes.size(), 1u) << "said once, at the first slow write:\n" << short_grace.output;
  EXPECT_NE(notes.front().find("gives the ranks 1 s before SIGKILL"), std::string::npos) << notes.front();
  EXPECT_NE(notes.front().find("SIGUSR1"), std::string::npos) << notes.front();
  const test::CommandResult long_grace = test::run_command("env OMPI_MCA_odls_base_sigkill_timeout=30 "
                                                           "DDP_TEST_CHECKPOINT_WRITE=slow:1 " + run +
                                                           " --checkpoint-dir " + dir + "/b 2>&1");
  ASSERT_EQ(long_grace.exit_code, 0) << long_grace.output;
  EXPECT_EQ(long_grace.output.find("note: this checkpoint took"), std::string::npos) << long_grace.output;
#endif
}

}  // namespace
}  // namespace ddp
