// test_cli_mpirun.cpp: ddp_train under mpiexec as a user runs it on CPU
// ranks: a checkpoint written by 4 ranks resumes with 2 at the same global
// batch and lands where the straight 4-rank run lands; --global-batch that
// does not divide by the ranks is refused. Skipped in a build without MPI.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "support/temp_dir.h"
#include "support/cli_test.h"
#include "support/test_support.h"
#include "trainer/models/mlp/mlp_config.h"
#include "trainer/params/parameter_store.h"
#include "trainer/checkpoint/weights_io.h"

namespace ddp {
namespace {
namespace fs = std::filesystem;

#if defined(DDP_MPIEXEC)
test::CommandResult mpirun_trainer(int ranks, const std::string& args) {
  return test::run_command(test::mpiexec_prefix(ranks) + test::trainer_command() + " " + args + " 2>&1");
}

std::string summary_record(const std::string& metrics_path) {
  std::ifstream in(metrics_path);
  std::string line, found;
  while (std::getline(in, line))
    if (line.find("\"event\":\"summary\"") != std::string::npos) found = line;
  return found;
}
#endif

TEST(CliMpirun, FourRankCheckpointResumesWithTwoRanks) {
#if !defined(DDP_MPIEXEC)
  GTEST_SKIP() << "built without MPI";
#else
  const test::TempDir temp_dir("mpirun-resume");
  const std::string& dir = temp_dir.path();
  const std::string common =
      "--data synthetic --layers 10,32,10 --global-batch 64 --steps 40 --lr-schedule cosine "
      "--init-scale 1024 --log-every 100 --seed 5";
  const auto straight = mpirun_trainer(4, common + " --save-weights " + dir + "/straight");
  ASSERT_EQ(straight.exit_code, 0) << straight.output;

  const auto first = mpirun_trainer(4, common + " --stop-after-steps 20 --checkpoint-dir " + dir + "/ckpt");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  int checkpoints = 0;
  for (const auto& e : fs::directory_iterator(dir + "/ckpt")) checkpoints += e.path().extension() == ".safetensors";
  EXPECT_EQ(checkpoints, 1) << "rank 0 alone writes";

  const auto second = mpirun_trainer(2, common + " --resume --checkpoint-dir " + dir + "/ckpt --metrics " + dir +
                                            "/m.jsonl --save-weights " + dir + "/resumed");
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find("at step 20"), std::string::npos) << second.output;
  EXPECT_NE(second.output.find("world 2 (MPI), batch 32 per rank, global batch 64"), std::string::npos)
      << second.output;
  const std::string summary = summary_record(dir + "/m.jsonl");
  EXPECT_NE(summary.find("\"steps\":40"), std::string::npos) << summary;
  EXPECT_NE(summary.find("\"world_size\":2"), std::string::npos) << summary;
  EXPECT_NE(summary.find("\"global_batch\":64"), std::string::npos) << summary;

  // Same samples per step and the same schedule: the two runs differ only by
  // the order of the FP16 gradient sums (4 vs 2 ranks) in the last 20 steps.
  // Measured 1.8e-5 of the weights' update; a resume at a wrong step or
  // a wrong data position ends far from the straight run.
  const ParameterRegistry registry = mlp_parameters({10, 32, 10});
  const auto a = load_weights_npy(dir + "/straight", registry), b = load_weights_npy(dir + "/resumed", registry);
  const auto start = registry.initial_values(5);
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i)
    diff += std::pow(double(a[i]) - b[i], 2), norm += std::pow(double(a[i]) - start[i], 2);
  EXPECT_LT(std::sqrt(diff / norm), 5e-3);
#endif
}

TEST(CliMpirun, GlobalBatchThatDoesNotDivideIsRefused) {
#if !defined(DDP_MPIEXEC)
  GTEST_SKIP() << "built without MPI";
#else
  const auto r = mpirun_trainer(3, "--data synthetic --global-batch 64 --steps 5");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--global-batch 64 does not divide by 3 ranks x --grad-accum 1"), std::string::npos)
      << r.output;
#endif
}

// stdout of --bench is exactly one JSON line (notices go to stderr).
std::string only_stdout_line(const std::string& command) {
  const auto r = test::run_command(command + " 2>/dev/null");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  return r.output;
}

using test::json_value;

TEST(CliBench, OneRankPrintsOneJsonLine) {
  const std::string line = only_stdout_line(std::string(DDP_TRAIN_BINARY) +
                                            " --device cpu --threads 1 --bench --layers 20,30,5 --batch-size 16 "
                                            "--bench-warmup 2 --bench-steps 7 --peak-tflops 1");
  EXPECT_EQ(line.rfind("{\"event\":\"bench\"", 0), 0u) << line;
  EXPECT_GT(json_value(line, "samples_per_s"), 0.0) << line;
  EXPECT_EQ(json_value(line, "timed_steps"), 7.0) << line;
  EXPECT_GT(json_value(line, "mfu"), 0.0) << line;
}

TEST(CliBench, TwoRanksReportAllReduceTime) {
#if !defined(DDP_MPIEXEC)
  GTEST_SKIP() << "built without MPI";
#else
  const std::string line = only_stdout_line(
      test::mpiexec_prefix(2) + DDP_TRAIN_BINARY +
      " --device cpu --threads 1 --bench --layers 20,300,5 --global-batch 32 --bench-warmup 2 --bench-steps 5");
  EXPECT_EQ(json_value(line, "world_size"), 2.0) << line;
  EXPECT_EQ(json_value(line, "batch_per_rank"), 16.0) << line;
  EXPECT_GT(json_value(line, "allreduce_ms_per_step"), 0.0) << line;
#endif
}

TEST(CliMpirun, BatchSizeAndGlobalBatchAreExclusive) {
  const auto r = test::run_command(std::string(DDP_TRAIN_BINARY) +
                                   " --device cpu --data synthetic --batch-size 8 --global-batch 64 2>&1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--batch-size and --global-batch are exclusive"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace ddp
