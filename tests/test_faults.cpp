// test_faults.cpp: ddp_train when things go wrong, as a user meets it:
// overflow storms (convergence, the scale sequence, skip counts, every rank
// skipping the same steps), --max-bad-steps, NaN in a data file, SIGTERM and
// SIGINT (a checkpoint at a step boundary, exit 128 + signal, a second
// signal ending the process at once), a rank killed with SIGKILL, a stalled
// rank caught by the collective watchdog, and a checkpoint write cut short.
// The multi-rank cases run the binary under mpiexec (skipped without MPI).
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "child_process.h"
#include "test_support.h"
#include "trainer/checkpoint.h"
#include "trainer/checkpoint_dir.h"
#include "trainer/npy_io.h"

namespace ddp {
namespace {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

using test::Child;
using test::children_of;
using test::exit_code;
using test::lines_with;
using test::read_text;
using test::seconds_since;

const std::string kTrainer = std::string(DDP_TRAIN_BINARY) + " --device cpu --threads 1";

#if defined(DDP_MPIEXEC)
// `env` first so the command can be exec'd (the child's pid is mpiexec's).
std::string mpiexec_prefix(int ranks) {
  return "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 " +
         std::string(DDP_MPIEXEC) + " -n " + std::to_string(ranks) + " --oversubscribe ";
}
#endif

// ---- metrics of a run ------------------------------------------------------------

double json_number(const std::string& line, const std::string& key) {
  const size_t at = line.find("\"" + key + "\":");
  if (at == std::string::npos) return std::nan("");
  return std::strtod(line.c_str() + at + key.size() + 3, nullptr);
}

struct StepRecord {
  int64_t step = 0;
  double loss_scale = 0, loss = 0;
  bool skipped = false;
};

std::vector<StepRecord> step_records(const std::string& metrics) {
  std::vector<StepRecord> out;
  for (const std::string& line : lines_with(read_text(metrics), "\"event\":\"step\"")) {
    StepRecord r;
    r.step = static_cast<int64_t>(json_number(line, "step"));
    r.loss_scale = json_number(line, "loss_scale");
    r.loss = json_number(line, "loss");
    r.skipped = line.find("\"skipped\":true") != std::string::npos;
    out.push_back(r);
  }
  return out;
}

// The dynamic loss-scaling rule as PyTorch's GradScaler (hysteresis 1) and
// Megatron's DynamicGradScaler (hysteresis H) document it, written out here
// independently of trainer/loss_scaler.cpp: an overflow resets the growth
// count and uses up one unit of hysteresis; the scale backs off (never below
// the floor) once the hysteresis is used up; growth_interval clean steps in
// a row grow the scale and restore the hysteresis. So with H = 2 the first
// overflow after a growth (or the start) does not back off, later ones do.
// Returns the scale each step runs with.
std::vector<double> transcribed_scales(double scale, int64_t hysteresis, double floor, int64_t growth_interval,
                                       const std::vector<bool>& overflow) {
  std::vector<double> out;
  int64_t hysteresis_left = hysteresis, clean_in_a_row = 0;
  for (bool ovf : overflow) {
    out.push_back(scale);
    if (ovf) {
      clean_in_a_row = 0;
      if (--hysteresis_left <= 0) scale = std::max(scale / 2, floor);
    } else if (++clean_in_a_row == growth_interval) {
      clean_in_a_row = 0;
      hysteresis_left = hysteresis;
      scale *= 2;
    }
  }
  return out;
}

class Faults : public ::testing::Test {
 protected:
  void SetUp() override { dir = test::make_temp_dir("faults"); }
  void TearDown() override { fs::remove_all(dir); }
  std::string dir;
};

// ---- numerics under stress -----------------------------------------------------------

#if defined(DDP_MPIEXEC)
// 500 steps on 2 ranks with rank 1's gradients made Inf every 5th step.
// Returns the step records; checks what holds for every scaler setting.
std::vector<StepRecord> overflow_storm(const std::string& dir, const std::string& scaler_flags) {
  const std::string metrics = dir + "/storm.jsonl";
  const auto r = test::run_command(mpiexec_prefix(2) + kTrainer +
                                   " --data synthetic --steps 500 --log-every 1 --inject-overflow-every 5 "
                                   "--inject-overflow-rank 1 --min-loss-scale 1 --init-scale 1024 --metrics " +
                                   metrics + " " + scaler_flags + " 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const std::vector<StepRecord> steps = step_records(metrics);
  EXPECT_EQ(steps.size(), 500u);
  for (size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(steps[i].step, static_cast<int64_t>(i + 1));
    // Exactly the injected steps skip (init scale 1024 overflows nowhere by itself).
    EXPECT_EQ(steps[i].skipped, steps[i].step % 5 == 0) << "step " << steps[i].step;
    EXPECT_TRUE(std::isfinite(steps[i].loss_scale) && steps[i].loss_scale >= 1) << steps[i].loss_scale;
  }
  const std::string text = read_text(metrics);
  const auto summary = lines_with(text, "\"event\":\"summary\"");
  EXPECT_EQ(summary.size(), 1u) << text;
  if (!summary.empty()) {
    EXPECT_EQ(json_number(summary[0], "skipped_steps"), 100.0) << summary[0];
  }
  // Training still converges: the test loss falls by more than 10x after the first epoch.
  const auto evals = lines_with(text, "\"event\":\"eval\"");
  EXPECT_GE(evals.size(), 2u);
  if (evals.size() >= 2) {
    const double first = json_number(evals.front(), "test_loss"), last = json_number(evals.back(), "test_loss");
    EXPECT_LT(last, first / 10) << evals.front() << "\n" << evals.back();
  }
  return steps;
}

std::vector<bool> skipped_of(const std::vector<StepRecord>& steps) {
  std::vector<bool> out;
  for (const auto& s : steps) out.push_back(s.skipped);
  return out;
}

std::vector<double> scales_of(const std::vector<StepRecord>& steps) {
  std::vector<double> out;
  for (const auto& s : steps) out.push_back(s.loss_scale);
  return out;
}
#endif

TEST_F(Faults, OverflowStormWithTheDefaultScaler) {
#if !defined(DDP_MPIEXEC)
  GTEST_SKIP() << "built without MPI";
#else
  const auto steps = overflow_storm(dir, "");
  ASSERT_EQ(steps.size(), 500u);
  EXPECT_EQ(scales_of(steps), transcribed_scales(1024, 1, 1, 2000, skipped_of(steps)));
  // By hand: every injected step halves the scale, from 1024 to the floor of 1 after 10 of them.
  EXPECT_EQ(steps[4].loss_scale, 1024);  // step 5 overflows at 1024
  EXPECT_EQ(steps[5].loss_scale, 512);
  EXPECT_EQ(steps[49].loss_scale, 2);  // step 50, the 10th overflow
  EXPECT_EQ(steps[50].loss_scale, 1);
  EXPECT_EQ(steps[499].loss_scale, 1);
#endif
}

TEST_F(Faults, OverflowStormWithHysteresisTwo) {
#if !defined(DDP_MPIEXEC)
  GTEST_SKIP() << "built without MPI";
#else
  const auto steps = overflow_storm(dir, "--hysteresis 2");
  ASSERT_EQ(steps.size(), 500u);
  EXPECT_EQ(scales_of(steps), transcribed_scales(1024, 2, 1, 2000, skipped_of(steps)));
  // By hand: the overflow of step 5 is absorbed, step 10's backs off, and so on to the floor.
  EXPECT_EQ(steps[9].loss_scale, 1024);
  EXPECT_EQ(steps[10].loss_scale, 512);
  EXPECT_EQ(steps[54].loss_scale, 2);  // step 55, the 11th overflow, the 10th backoff
  EXPECT_EQ(steps[55].loss_scale, 1);
#endif
}

// Growth every 3 clean steps restores the hysteresis between the injected
// overflows, so the scale climbs until the gradients overflow by themselves:
// the exact sequence over both kinds of overflow follows the rule.
TEST_F(Faults, HysteresisIsRestoredByGrowth) {
#if !defined(DDP_MPIEXEC)
  GTEST_SKIP() << "built without MPI";
#else
  const std::string metrics = dir + "/m.jsonl";
  const auto r = test::run_command(mpiexec_prefix(2) + kTrainer +
                                   " --data synthetic --steps 150 --log-every 1 --inject-overflow-every 5 "
                                   "--inject-overflow-rank 1 --init-scale 1024 --hysteresis 2 --growth-interval 3 "
                                   "--metrics " + metrics + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto steps = step_records(metrics);
  ASSERT_EQ(steps.size(), 150u);
  EXPECT_EQ(scales_of(steps), transcribed_scales(1024, 2, 0, 3, skipped_of(steps)));
  int natural = 0;
  for (const auto& s : steps) {
    if (s.step % 5 == 0) {
      EXPECT_TRUE(s.skipped) << "injected step " << s.step << " not skipped";
    }
    natural += s.skipped && s.step % 5 != 0;
  }
  EXPECT_GT(natural, 0) << "the scale never grew into a real overflow: the test exercises less than it claims";
  // By hand: growth after steps 1-3, step 5's overflow absorbed, growth after steps 6-8.
  EXPECT_EQ(steps[3].loss_scale, 2048);
  EXPECT_EQ(steps[5].loss_scale, 2048);
  EXPECT_EQ(steps[8].loss_scale, 4096);
#endif
}

TEST_F(Faults, MaxBadStepsEndsTheRunWithOneLine) {
  const std::string metrics = dir + "/m.jsonl";
  const auto r = test::run_command(kTrainer + " --data synthetic --steps 50 --log-every 1 --inject-overflow-every 1 "
                                              "--max-bad-steps 7 --metrics " + metrics + " 2>&1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const auto errors = lines_with(r.output, "ddp_train: error");
  ASSERT_EQ(errors.size(), 1u) << r.output;
  EXPECT_NE(errors[0].find("7 consecutive steps (1 to 7) were skipped for non-finite gradients"), std::string::npos)
      << errors[0];
  EXPECT_NE(errors[0].find("--max-bad-steps 7"), std::string::npos) << errors[0];
  EXPECT_EQ(step_records(metrics).size(), 6u) << "the run went on past step 7";
  EXPECT_TRUE(lines_with(read_text(metrics), "\"event\":\"summary\"").empty());
}

TEST_F(Faults, MaxBadStepsStopsEveryRankAtTheSameStep) {
#if !defined(DDP_MPIEXEC)
  GTEST_SKIP() << "built without MPI";
#else
  // Rank 1 alone overflows, from step 3 on: the sum makes every rank skip,
  // and all of them give up together at step 3 + 7 - 1 = 9, without MPI_Abort.
  const auto r = test::run_command(mpiexec_prefix(2) + kTrainer +
                                   " --data synthetic --steps 50 --inject-overflow 3,4,5,6,7,8,9,10,11 "
                                   "--inject-overflow-rank 1 --max-bad-steps 7 2>&1");
  EXPECT_NE(r.exit_code, 0) << r.output;
  const auto errors = lines_with(r.output, "ddp_train: error");
  ASSERT_EQ(errors.size(), 1u) << r.output;
  EXPECT_NE(errors[0].find("7 consecutive steps (3 to 9)"), std::string::npos) << errors[0];
  EXPECT_EQ(r.output.find("MPI_ABORT"), std::string::npos) << r.output;
#endif
}

TEST_F(Faults, NanInADataFileNamesTheSample) {
  const float nan = std::nanf("");
  const std::vector<float> x = {0, 1, 2, 3, 4, nan, 6, 7}, y(8, 0.0f), clean = {0, 1, 2, 3, 4, 5, 6, 7};
  save_npy_fp32(dir + "/x.npy", x.data(), {4, 2});
  save_npy_fp32(dir + "/clean.npy", clean.data(), {4, 2});
  save_npy_fp32(dir + "/y.npy", y.data(), {4, 2});
  const auto npy = test::run_command(kTrainer + " --data npy --train-x " + dir + "/x.npy --train-y " + dir +
                                     "/y.npy --test-x " + dir + "/clean.npy --test-y " + dir +
                                     "/y.npy --layers 2,2 --loss mse --steps 1 2>&1");
  EXPECT_NE(npy.exit_code, 0);
  const auto npy_errors = lines_with(npy.output, "ddp_train: error");
  ASSERT_EQ(npy_errors.size(), 1u) << npy.output;
  EXPECT_NE(npy_errors[0].find("x.npy: non-finite value (nan) in sample 2, feature 1"), std::string::npos)
      << npy_errors[0];

  std::ofstream(dir + "/train.csv") << "a,b,label\n1,2,0\n3,nan,1\n";
  std::ofstream(dir + "/test.csv") << "a,b,label\n1,2,0\n3,4,1\n";
  const auto csv = test::run_command(kTrainer + " --data csv --train-csv " + dir + "/train.csv --test-csv " + dir +
                                     "/test.csv --layers 2,2 --steps 1 2>&1");
  EXPECT_NE(csv.exit_code, 0);
  const auto csv_errors = lines_with(csv.output, "ddp_train: error");
  ASSERT_EQ(csv_errors.size(), 1u) << csv.output;
  EXPECT_NE(csv_errors[0].find("train.csv"), std::string::npos) << csv_errors[0];
  EXPECT_NE(csv_errors[0].find("line 3, column 2"), std::string::npos) << csv_errors[0];
  EXPECT_NE(csv_errors[0].find("non-finite"), std::string::npos) << csv_errors[0];
}

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

  const auto resumed = test::run_command(kTrainer + kLongRun + " --checkpoint-dir " + ck +
                                         " --resume --stop-after-steps 3 2>&1");
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
                  " --data synthetic --synthetic-samples 262144 --steps 100000000 --log-every 2000 --checkpoint-dir " + ck,
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
  EXPECT_EQ(lines_with(resumed.output, "resume: skipping " + temp + ": incomplete write").size(), 1u)
      << resumed.output;
  EXPECT_EQ(lines_with(resumed.output, "resume: skipping " + cut + ": truncated").size(), 1u) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from " + good + " at step 4"), std::string::npos) << resumed.output;
}

// The real thing: SIGKILL while a larger model writes a checkpoint at every
// step, at a few moments; each time the directory still resumes.
TEST_F(Faults, KillDuringCheckpointWritesLeavesAResumableDirectory) {
  const std::string ck = dir + "/ck";
  const std::string run = kTrainer + " --data synthetic --layers 10,1024,1024,10 --steps 100000 --log-every 1 "
                                     "--checkpoint-every 1 --keep-checkpoints 2 --checkpoint-dir " + ck;
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
