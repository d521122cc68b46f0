// test_cli_zero.cpp: --zero as a user runs it. A checkpoint written by 4
// ranks at --zero 3 resumes on 3 ranks at --zero 1 and on one at --zero 0,
// and each lands where the straight 4-rank run lands; the banner and the
// metrics give the memory per rank; --bench reports state, peak and bytes
// sent; --zero-shard-size's groups are said in the memory line and record
// (the default on one host: the world); bad values, --cuda-graph beyond
// stage 1, --zero-prefetch other than at stage 3 and --zero-shard-size at
// --zero 0 or not dividing the world are refused in one line.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "support/temp_dir.h"
#include "support/cli_test.h"
#include "support/test_support.h"
#include "trainer/checkpoint/weights_io.h"
#include "trainer/models/mlp/mlp_config.h"
#include "trainer/params/parameter_store.h"

namespace ddp {
namespace {
namespace fs = std::filesystem;

test::CommandResult trainer_on(int ranks, const std::string& args) {
#if defined(DDP_MPIEXEC)
  const std::string launcher = test::mpiexec_prefix(ranks);
#else
  const std::string launcher;
#endif
  return test::run_command(launcher + test::trainer_command() + " " + args + " 2>&1");
}

std::string record_of(const std::string& metrics_path, const std::string& event) {
  std::ifstream in(metrics_path);
  std::string line;
  while (std::getline(in, line))
    if (line.find("\"event\":\"" + event + "\"") != std::string::npos) return line;
  return "";
}

using test::json_value;

TEST(CliZero, AStageThreeCheckpointResumesOnOtherRanksAndStages) {
#if !defined(DDP_MPIEXEC)
  GTEST_SKIP() << "built without MPI";
#else
  const test::TempDir temp_dir("cli-zero-resume");
  const std::string& dir = temp_dir.path();
  const std::string common =
      "--data synthetic --layers 10,32,10 --global-batch 48 --steps 30 "
      "--lr-schedule cosine "
      "--optimizer adamw --lr 3e-3 --clip-grad-norm 1 --init-scale 1024 "
      "--log-every 100 --seed 5";
  const auto straight = trainer_on(4, common + " --zero 3 --save-weights " + dir + "/straight");
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  const auto first = trainer_on(4, common + " --zero 3 --stop-after-steps 15 --checkpoint-dir " + dir + "/ckpt");
  ASSERT_EQ(first.exit_code, 0) << first.output;

  const ParameterRegistry registry = mlp_parameters({10, 32, 10});
  const auto a = load_weights_npy(dir + "/straight", registry);
  const auto start = registry.initial_values(5);
  struct Resume {
    int ranks, stage, shard_size;  // shard_size 0: the default
    const char* groups;            // what the memory line says of them
  };
  for (const Resume r :
       {Resume{3, 1, 0, ""}, Resume{1, 0, 0, ""}, Resume{4, 2, 2, ", sharded over groups of 2, 2 replicas"}}) {
    const std::string tag =
        std::to_string(r.ranks) + "x" + std::to_string(r.stage) + "g" + std::to_string(r.shard_size);
    fs::copy(dir + "/ckpt", dir + "/ckpt" + tag);
    const std::string groups = r.shard_size > 0 ? " --zero-shard-size " + std::to_string(r.shard_size) : "";
    const auto second =
        trainer_on(r.ranks, common + " --zero " + std::to_string(r.stage) + groups + " --resume --checkpoint-dir " +
                                dir + "/ckpt" + tag + " --metrics " + dir + "/m" + tag + ".jsonl" + " --save-weights " +
                                dir + "/resumed" + tag);
    ASSERT_EQ(second.exit_code, 0) << second.output;
    EXPECT_NE(second.output.find("at step 15"), std::string::npos) << second.output;
    EXPECT_NE(second.output.find("memory per rank (--zero " + std::to_string(r.stage) + ", " + std::to_string(r.ranks) +
                                 " rank(s)" + r.groups + ")"),
              std::string::npos)
        << second.output;
    const std::string memory = record_of(dir + "/m" + tag + ".jsonl", "memory");
    EXPECT_EQ(json_value(memory, "zero_stage"), r.stage) << memory;
    // One host: the default group is its node, the whole world.
    EXPECT_EQ(json_value(memory, "zero_shard_size"), r.shard_size > 0 ? r.shard_size : r.ranks) << memory;
    EXPECT_GT(json_value(memory, "state_bytes"), 0.0) << memory;
    // The same samples and schedule: the runs differ by the order of the
    // FP16 sums in the last 15 steps; a wrong range restored is far off.
    const auto b = load_weights_npy(dir + "/resumed" + tag, registry);
    double diff = 0, norm = 0;
    for (size_t i = 0; i < a.size(); ++i)
      diff += std::pow(double(a[i]) - b[i], 2), norm += std::pow(double(a[i]) - start[i], 2);
    EXPECT_LT(std::sqrt(diff / norm), 5e-3) << tag;
  }
#endif
}

TEST(CliZero, BenchReportsStateMemoryAndBytesSent) {
#if !defined(DDP_MPIEXEC)
  GTEST_SKIP() << "built without MPI";
#else
  double state[4] = {0, 0, 0, 0};
  for (int stage : {0, 1, 2, 3}) {
    const auto r = test::run_command(test::mpiexec_prefix(2) + DDP_TRAIN_BINARY +
                                     " --device cpu --threads 1 --bench --layers 64,96,10 " +
                                     "--batch-size 8 --optimizer adamw --bench-warmup 1 --bench-steps 3 "
                                     "--zero " +
                                     std::to_string(stage) + " 2>/dev/null");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(json_value(r.output, "zero_stage"), stage) << r.output;
    state[stage] = json_value(r.output, "state_bytes_per_rank");
    EXPECT_GE(json_value(r.output, "peak_allocated_bytes_per_rank"), state[stage]) << r.output;
    // 64*96+96+96*10+10 = 7,210 parameters; 2 ranks: (N-1)/N = 1/2; every
    // element sent twice as an all-reduce or as a reduce-scatter and a
    // gather, three times at stage 3 (gathered for forward and backward).
    const double times = stage == 3 ? 3.0 : 2.0;
    const double sent = json_value(r.output, "comm_bytes_per_step_per_rank");
    EXPECT_EQ(json_value(r.output, "comm_bytes_theory"), 2.0 * 0.5 * times * 7210) << r.output;
    EXPECT_GE(sent, 2.0 * 0.5 * times * 7210) << r.output;
    EXPECT_LE(sent, 2.0 * 0.5 * times * (7210 + 64)) << r.output;  // the layout's padding
  }
  // The 21 bytes per parameter, sharded over 2 ranks by stage: 17 of them
  // from stage 1, the FP16 gradient's 2 from stage 2, the weight's 2 at 3.
  EXPECT_NEAR(state[1] / state[0], (4 + 17 / 2.0) / 21.0, 0.01);
  EXPECT_NEAR(state[2] / state[0], (2 + 19 / 2.0) / 21.0, 0.01);
  EXPECT_NEAR(state[3] / state[0], (21 / 2.0) / 21.0, 0.01);
#endif
}

TEST(CliZero, BadValuesAndGraphsBeyondStageOneAreRefusedInOneLine) {
  auto alone = [](const std::string& args) {
    return test::run_command(std::string(DDP_TRAIN_BINARY) + " --device cpu --data synthetic --steps 2 " + args +
                             " 2>&1");
  };
  for (const char* args : {"--zero 4", "--zero -1", "--zero 2 --cuda-graph", "--zero 3 --cuda-graph",
                           "--zero 3 --zero-prefetch -1", "--zero 2 --zero-prefetch 2", "--zero-prefetch 0",
                           "--zero-shard-size 1", "--zero 1 --zero-shard-size 2", "--zero 3 --zero-shard-size -1"}) {
    const auto r = alone(args);
    EXPECT_NE(r.exit_code, 0) << args;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << args << ": " << r.output;
    EXPECT_NE(r.output.find("--zero"), std::string::npos) << args << ": " << r.output;
  }
  EXPECT_NE(alone("--zero 3 --cuda-graph").output.find("--cuda-graph works with --zero 0 and 1 only"),
            std::string::npos);
  EXPECT_NE(alone("--zero 2 --zero-prefetch 2").output.find("--zero-prefetch applies to --zero 3"), std::string::npos);
  EXPECT_NE(alone("--zero 3 --zero-prefetch -1").output.find("--zero-prefetch must be >= 0"), std::string::npos);
  EXPECT_NE(alone("--zero-shard-size 1").output.find("--zero-shard-size applies to --zero 1, 2 and 3"),
            std::string::npos);
  EXPECT_NE(alone("--zero 3 --zero-shard-size -1").output.find("--zero-shard-size must be >= 1"), std::string::npos);
  const auto prefetch = alone("--zero 3 --zero-prefetch 2");
  EXPECT_EQ(prefetch.exit_code, 0) << prefetch.output;
  const auto default_groups = alone("--zero-shard-size 0");  // the default, given: fine at --zero 0
  EXPECT_EQ(default_groups.exit_code, 0) << default_groups.output;
}

}  // namespace
}  // namespace ddp
