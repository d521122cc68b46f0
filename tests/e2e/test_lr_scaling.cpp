// test_lr_scaling.cpp: --lr-scaling none|linear|sqrt with --base-batch: the
// rule's arithmetic, and the rate a run uses (its step records and banner)
// for several global batches, on one rank and on two.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "kernels/error.h"
#include "support/temp_dir.h"
#include "support/cli_test.h"
#include "support/test_support.h"
#include "trainer/optim/lr_scaling.h"

namespace ddp {
namespace {

TEST(LrScaling, LinearAndSqrtScaleByTheGlobalBatchRatio) {
  std::mt19937 rng(test::test_seed());
  SCOPED_TRACE("seed " + std::to_string(test::test_seed()) + " (set DDP_TEST_SEED to reproduce)");
  std::uniform_real_distribution<double> rate(1e-4, 1.0);
  for (int trial = 0; trial < 20; ++trial) {
    const double lr = rate(rng);
    const int64_t base = 1 + static_cast<int64_t>(rng() % 4096), global = 1 + static_cast<int64_t>(rng() % 65536);
    const double ratio = static_cast<double>(global) / static_cast<double>(base);
    EXPECT_EQ(scaled_lr(lr, LrScaling::None, base, global), lr);
    EXPECT_DOUBLE_EQ(scaled_lr(lr, LrScaling::Linear, base, global), lr * ratio);
    EXPECT_DOUBLE_EQ(scaled_lr(lr, LrScaling::Sqrt, base, global), lr * std::sqrt(ratio));
  }
  EXPECT_DOUBLE_EQ(scaled_lr(0.1, LrScaling::Linear, 256, 8192), 3.2);  // Goyal et al.'s 0.1 per 256, at 8k
  EXPECT_DOUBLE_EQ(scaled_lr(1e-3, LrScaling::Sqrt, 64, 256), 2e-3);
  EXPECT_EQ(parse_lr_scaling("sqrt"), LrScaling::Sqrt);
  EXPECT_THROW(parse_lr_scaling("quadratic"), Error);
}

// The lr of every step record of a run with a constant schedule.
std::vector<double> step_rates(const std::string& metrics) {
  std::ifstream in(metrics);
  std::vector<double> rates;
  for (std::string line; std::getline(in, line);) {
    if (line.find("\"event\":\"step\"") == std::string::npos) continue;
    const size_t at = line.find("\"lr\":");
    rates.push_back(std::strtod(line.c_str() + at + 5, nullptr));
  }
  return rates;
}

test::CommandResult run_on(int ranks, const std::string& args) {
  std::string launcher;
#if defined(DDP_MPIEXEC)
  if (ranks > 1) launcher = test::mpiexec_prefix(ranks);
#else
  if (ranks > 1) return {77, "no MPI"};
#endif
  return test::run_command(launcher + test::trainer_command() + " --data synthetic " +
                           "--synthetic-samples 512 --steps 4 --log-every 1 --lr-schedule constant " + args + " 2>&1");
}

TEST(LrScaling, ARunUsesTheScaledRateAtEachGlobalBatch) {
  const test::TempDir temp_dir("lr_scaling");
  const std::string& dir = temp_dir.path();
  struct Case {
    int ranks;
    int64_t global_batch;
    const char* rule;
    double expected;  // for --lr 0.01 at --base-batch 32
  };
  const Case cases[] = {{1, 32, "linear", 0.01},
                        {1, 64, "linear", 0.02},
                        {2, 128, "linear", 0.04},
                        {2, 64, "sqrt", 0.01 * std::sqrt(2.0)},
                        {1, 16, "sqrt", 0.01 / std::sqrt(2.0)},
                        {2, 64, "none", 0.01}};
  for (const Case& k : cases) {
    const std::string metrics =
        dir + "/m-" + std::to_string(k.ranks) + "-" + std::to_string(k.global_batch) + "-" + k.rule + ".jsonl";
    const test::CommandResult r =
        run_on(k.ranks, "--lr 0.01 --global-batch " + std::to_string(k.global_batch) + " --lr-scaling " + k.rule +
                            (std::string(k.rule) != "none" ? " --base-batch 32" : "") + " --metrics " + metrics);
    if (r.exit_code == 77) GTEST_SKIP() << "built without MPI";
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const std::vector<double> rates = step_rates(metrics);
    ASSERT_EQ(rates.size(), 4u) << r.output;
    for (double lr : rates) EXPECT_NEAR(lr, k.expected, 1e-12 * k.expected) << k.rule << " G=" << k.global_batch;
    const bool says =
        r.output.find("scaled " + std::string(k.rule) + " to " + std::to_string(k.global_batch)) != std::string::npos;
    EXPECT_EQ(says, std::string(k.rule) != "none") << r.output;
  }
}

TEST(LrScaling, BadFlagsAreRefusedInOneLine) {
  for (const char* args : {"--lr-scaling linear", "--lr-scaling cubic --base-batch 32", "--base-batch 32",
                           "--lr-scaling sqrt --base-batch -4"}) {
    const test::CommandResult r = run_on(1, args);
    EXPECT_NE(r.exit_code, 0) << args;
    EXPECT_NE(r.output.find("--"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find('\n'), r.output.size() - 1) << args << ": " << r.output;
  }
}

}  // namespace
}  // namespace ddp
