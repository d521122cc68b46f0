// test_faults_processes.cpp: ddp_train when its processes are stopped, killed
// or stall, as a user meets it: SIGTERM and SIGINT (a checkpoint at a step
// boundary, exit 128 + signal, a second signal ending the process at once),
// a rank killed with SIGKILL, a stalled rank caught by the collective
// watchdog, and a checkpoint write cut short. The multi-rank cases run the
// binary under mpiexec (skipped without MPI).
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "child_process.h"
#include "faults_support.h"
#include "support/test_support.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/checkpoint_dir.h"

namespace ddp {
namespace {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

using namespace test;  // faults_support.h, child_process.h: kTrainer, the Faults fixture, Child

// ---- signals -----------------------------------------------------------------------------

// A long run; "samples/s" first appears in the first progress line.
const std::string kLongRun = " --data synthetic --steps 100000000 --log-every 500";

TEST_F(Faults, SigtermStopsAtAStepBoundaryWithACheckpoint) {
  const std::string ck = dir + "/ck";
  Child child(kTrainer + kLongRun + " --checkpoint-dir " + ck, dir + "/out");
  ASSERT_TRUE(child.wait_for_output("samples/s", 30)) << child.output();
  kill(child.pid(), SIGTERM);
  const auto status = child.wait_exit(30);
  ASSERT_TRUE(status.has_value()) << "still running 30 s after SIGTERM";
  EXPECT_EQ(exit_code(*status), 128 + SIGTERM) << child.output();
  const auto stopped = lines_with(child.output(), "stopped by SIGTERM at step ");
  ASSERT_EQ(stopped.size(), 1u) << child.output();
  const int64_t step = std::stoll(stopped[0].substr(stopped[0].find("at step ") + 8));
  const std::string file = ck + "/" + checkpoint_file_name(step);
  EXPECT_NE(stopped[0].find("(checkpoint " + file + "; --resume continues)"), std::string::npos) << stopped[0];
  ASSERT_TRUE(fs::exists(file)) << stopped[0];
  EXPECT_EQ(read_checkpoint(file).step, step);

  const auto resumed =
      test::run_command(kTrainer + kLongRun + " --checkpoint-dir " + ck + " --resume --stop-after-steps 3 2>&1");
  EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from " + file + " at step " + std::to_string(step)), std::string::npos)
      << resumed.output;
  EXPECT_TRUE(fs::exists(ck + "/" + checkpoint_file_name(step + 3)));
}

TEST_F(Faults, SigintWithoutCheckpointDirSaysSo) {
  Child child(kTrainer + kLongRun, dir + "/out");
  ASSERT_TRUE(child.wait_for_output("samples/s", 30)) << child.output();
  kill(child.pid(), SIGINT);
  const auto status = child.wait_exit(30);
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(exit_code(*status), 128 + SIGINT) << child.output();
  EXPECT_EQ(lines_with(child.output(), "(no --checkpoint-dir, nothing saved)").size(), 1u) << child.output();
}

// A process that cannot reach a step boundary (stalled) ignores the first
// signal's request; the second ends it at once, by the signal itself.
TEST_F(Faults, SecondSignalEndsTheProcessAtOnce) {
  Child child(kTrainer + kLongRun + " --stall-at-step 3", dir + "/out");
  ASSERT_TRUE(child.wait_for_output("stalls before step 3", 30)) << child.output();
  kill(child.pid(), SIGTERM);
  EXPECT_FALSE(child.wait_exit(0.5).has_value()) << "the first signal must only ask for a stop at a step boundary";
  kill(child.pid(), SIGTERM);
  const auto status = child.wait_exit(10);
  ASSERT_TRUE(status.has_value()) << "still running 10 s after the second SIGTERM";
  EXPECT_EQ(exit_code(*status), -SIGTERM) << child.output();
}

TEST_F(Faults, SigtermToMpiexecStopsEveryRankAtTheSameStep) {
#if !defined(DDP_MPIEXEC)
  GTEST_SKIP() << "built without MPI";
#else
  // Open MPI 4.1's mpiexec, on SIGTERM, sleeps odls_base_sigkill_timeout
  // seconds (default 1), sends SIGTERM to every rank, sleeps as long again
  // and sends SIGKILL; it forwards no output while it sleeps. 3 s here, so a
  // checkpoint's fsync on a busy disk (other tests) fits, and a quiet run
  // (few evaluations, rare log lines), so rank 0 never blocks on a full pipe.
  // The ranks agree on the step through the per-step flag all-reduce, and
  // rank 0 alone writes the checkpoint.
  const std::string ck = dir + "/ck";
  Child child(mpiexec_prefix(2) + "--mca odls_base_sigkill_timeout 3 " + kTrainer +
                  " --data synthetic --synthetic-samples 262144 --steps 100000000 --log-every 2000 --checkpoint-dir " +
                  ck,
              dir + "/out");
  ASSERT_TRUE(child.wait_for_output("samples/s", 60)) << child.output();
  kill(child.pid(), SIGTERM);
  const auto status = child.wait_exit(60);
  ASSERT_TRUE(status.has_value()) << "mpiexec still running 60 s after SIGTERM";
  EXPECT_NE(exit_code(*status), 0) << child.output();
  const auto stopped = lines_with(child.output(), "stopped by SIGTERM at step ");
  ASSERT_EQ(stopped.size(), 1u) << child.output();
  const int64_t step = std::stoll(stopped[0].substr(stopped[0].find("at step ") + 8));
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(ck)) files.push_back(e.path().filename().string());
  EXPECT_EQ(files, std::vector<std::string>{checkpoint_file_name(step)}) << "one complete checkpoint, no temp file";
  EXPECT_EQ(read_checkpoint(ck + "/" + checkpoint_file_name(step)).step, step);
#endif
}

// SIGTERM to one rank alone (here not rank 0, whose pid is not known): the
// per-step flag all-reduce (MAX) carries the request to every rank, so all
// of them stop at the same step and leave MPI together. Without the
// agreement the signalled rank would leave alone and its peers would hang in
// their next collective.
TEST_F(Faults, SigtermToOneRankStopsEveryRankAtTheSameStep) {
#if !defined(DDP_MPIEXEC)
  GTEST_SKIP() << "built without MPI";
#else
  const std::string ck = dir + "/ck";
  Child child(mpiexec_prefix(2) + kTrainer + kLongRun + " --checkpoint-dir " + ck, dir + "/out");
  ASSERT_TRUE(child.wait_for_output("samples/s", 60)) << child.output();
  const std::vector<pid_t> ranks = children_of(child.pid());
  ASSERT_EQ(ranks.size(), 2u) << child.output();
  kill(ranks.back(), SIGTERM);
  const auto status = child.wait_exit(60);
  ASSERT_TRUE(status.has_value()) << "mpiexec still running 60 s after SIGTERM to one rank:\n" << child.output();
  EXPECT_EQ(exit_code(*status), 128 + SIGTERM) << child.output();
  const auto stopped = lines_with(child.output(), "stopped by SIGTERM at step ");
  ASSERT_EQ(stopped.size(), 1u) << child.output();
  const int64_t step = std::stoll(stopped[0].substr(stopped[0].find("at step ") + 8));
  EXPECT_EQ(read_checkpoint(ck + "/" + checkpoint_file_name(step)).step, step);
#endif
}

// ---- a rank that dies or stalls ------------------------------------------------------------

#if defined(DDP_MPIEXEC)
// Kills one rank of a running job with SIGKILL; returns the seconds until
// mpiexec exited and checks it failed.
double seconds_until_job_ends_after_kill(int ranks, const std::string& out) {
  Child child(mpiexec_prefix(ranks) + kTrainer + kLongRun, out);
  EXPECT_TRUE(child.wait_for_output("samples/s", 60)) << child.output();
  std::vector<pid_t> kids = children_of(child.pid());  // the ranks (Open MPI starts local ranks itself)
  EXPECT_EQ(kids.size(), static_cast<size_t>(ranks)) << child.output();
  if (kids.empty()) return -1;
  const auto start = Clock::now();
  kill(kids.back(), SIGKILL);
  const auto status = child.wait_exit(90);
  const double seconds = seconds_since(start);
  EXPECT_TRUE(status.has_value()) << "mpiexec still running 90 s after a rank was killed";
  if (status) {
    EXPECT_NE(exit_code(*status), 0) << child.output();
  }
  return seconds;
}
#endif

TEST_F(Faults, KilledRankEndsTheJobWithTwoRanks) {
#if !defined(DDP_MPIEXEC)
  GTEST_SKIP() << "built without MPI";
#else
  const double s = seconds_until_job_ends_after_kill(2, dir + "/out");
  EXPECT_LT(s, 60) << "the surviving rank hung";
  std::printf("job of 2 ranks ended %.2f s after SIGKILL of one\n", s);
#endif
}

TEST_F(Faults, KilledRankEndsTheJobWithFourRanks) {
#if !defined(DDP_MPIEXEC)
  GTEST_SKIP() << "built without MPI";
#else
  const double s = seconds_until_job_ends_after_kill(4, dir + "/out");
  EXPECT_LT(s, 60) << "the surviving ranks hung";
  std::printf("job of 4 ranks ended %.2f s after SIGKILL of one\n", s);
#endif
}

TEST_F(Faults, StalledRankIsCaughtByTheWatchdog) {
#if !defined(DDP_MPIEXEC)
  GTEST_SKIP() << "built without MPI";
#else
  const auto start = Clock::now();
  Child child(mpiexec_prefix(2) + kTrainer + kLongRun + " --stall-rank 1 --stall-at-step 12 --collective-timeout 3",
              dir + "/out");
  const auto status = child.wait_exit(60);
  const double seconds = seconds_since(start);
  ASSERT_TRUE(status.has_value()) << "still running after 60 s:\n" << child.output();
  EXPECT_NE(exit_code(*status), 0) << child.output();
  EXPECT_NE(child.output().find("rank 1 stalls before step 12"), std::string::npos) << child.output();
  EXPECT_EQ(lines_with(child.output(), "ddp_train: error (rank 0 on ").size(), 1u) << child.output();
  EXPECT_NE(child.output().find("all-reduce of step 12 did not finish within 3 s (--collective-timeout); a peer may "
                                "have stalled or died; aborting"),
            std::string::npos)
      << child.output();
  // Start-up, 11 steps, the 3 s timeout, up to 1 s until the watchdog looks, and the teardown.
  EXPECT_LT(seconds, 3 + 15) << child.output();
  std::printf("stalled job ended after %.2f s (timeout 3 s)\n", seconds);
#endif
}

// ---- checkpoint writes cut short ------------------------------------------------------------

// A crash in the middle of writing leaves what write_checkpoint_atomic can
// leave (a partial temporary file) and, from a copy tool or a file system
// without atomic rename, a cut final-named file: bare --resume passes over
// both, says why, and resumes from the newest complete one.
TEST_F(Faults, ResumeSkipsACheckpointWriteCutShort) {
  const std::string ck = dir + "/ck";
  const std::string run = kTrainer + " --data synthetic --steps 40 --checkpoint-every 2 --checkpoint-dir " + ck;
  const auto first = test::run_command(run + " --stop-after-steps 8 2>&1");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const std::string good = ck + "/" + checkpoint_file_name(4);
  auto bytes_of = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::vector<char>(std::istreambuf_iterator<char>(in), {});
  };
  // Step 8's file cut in half, step 6's only a third written under its temporary name.
  const std::string cut = ck + "/" + checkpoint_file_name(8), temp = ck + "/" + checkpoint_file_name(6) + ".tmp.4242";
  const std::vector<char> bytes8 = bytes_of(cut), bytes6 = bytes_of(ck + "/" + checkpoint_file_name(6));
  ASSERT_GT(bytes8.size(), 100u);
  fs::remove(ck + "/" + checkpoint_file_name(6));
  std::ofstream(cut, std::ios::binary | std::ios::trunc).write(bytes8.data(), bytes8.size() / 2);
  std::ofstream(temp, std::ios::binary).write(bytes6.data(), bytes6.size() / 3);

  const auto resumed = test::run_command(run + " --resume --stop-after-steps 1 2>&1");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_EQ(lines_with(resumed.output, "resume: skipping " + temp + ": incomplete write").size(), 1u) << resumed.output;
  EXPECT_EQ(lines_with(resumed.output, "resume: skipping " + cut + ": truncated").size(), 1u) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from " + good + " at step 4"), std::string::npos) << resumed.output;
}

// The real thing: SIGKILL while a larger model writes a checkpoint at every
// step, at a few moments; each time the directory still resumes.
TEST_F(Faults, KillDuringCheckpointWritesLeavesAResumableDirectory) {
  const std::string ck = dir + "/ck";
  const std::string run = kTrainer +
                          " --data synthetic --layers 10,1024,1024,10 --steps 100000 --log-every 1 "
                          "--checkpoint-every 1 --keep-checkpoints 2 --checkpoint-dir " +
                          ck;
  const auto first = test::run_command(run + " --stop-after-steps 2 2>&1");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  for (int delay_ms : {0, 7, 23}) {
    SCOPED_TRACE("kill " + std::to_string(delay_ms) + " ms after the first step");
    Child child(run + " --resume", dir + "/out");
    ASSERT_TRUE(child.wait_for_output("samples/s", 30)) << child.output();
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    kill(child.pid(), SIGKILL);
    ASSERT_TRUE(child.wait_exit(10).has_value());
    const CheckpointScan scan = find_newest_valid_checkpoint(ck);
    ASSERT_FALSE(scan.newest_valid.empty()) << "no valid checkpoint left";
    for (const auto& [path, why] : scan.skipped)
      EXPECT_NE(why.find("incomplete write"), std::string::npos) << path << ": " << why;
  }
  const auto resumed = test::run_command(run + " --resume --stop-after-steps 1 2>&1");
  EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from "), std::string::npos) << resumed.output;
}

}  // namespace
}  // namespace ddp
