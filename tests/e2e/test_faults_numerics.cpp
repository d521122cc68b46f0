// test_faults_numerics.cpp: ddp_train's numerics under stress, as a user meets
// them: overflow storms (convergence, the scale sequence against the rule
// written out here, skip counts, every rank skipping the same steps),
// --max-bad-steps, and NaN in a data file. The multi-rank cases run the
// binary under mpiexec (skipped without MPI).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "child_process.h"
#include "faults_support.h"
#include "support/test_support.h"
#include "trainer/io/npy_io.h"

namespace ddp {
namespace {

using namespace test;  // faults_support.h, child_process.h: kTrainer, the Faults fixture, Child

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
// independently of trainer/optim/loss_scaler.cpp: an overflow resets the growth
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
                                   "--metrics " +
                                   metrics + " 2>&1");
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
  const auto r = test::run_command(kTrainer +
                                   " --data synthetic --steps 50 --log-every 1 --inject-overflow-every 1 "
                                   "--max-bad-steps 7 --metrics " +
                                   metrics + " 2>&1");
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
  const auto npy =
      test::run_command(kTrainer + " --data npy --train-x " + dir + "/x.npy --train-y " + dir + "/y.npy --test-x " +
                        dir + "/clean.npy --test-y " + dir + "/y.npy --layers 2,2 --loss mse --steps 1 2>&1");
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

}  // namespace
}  // namespace ddp
