// test_config_check.cpp: a TrainConfig built in code is checked as the
// command line's is (trainer/config/config_check.h): the Trainer refuses a value
// outside its sense with the very line parse_options gives for the flag
// that sets it, and a default config passes.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/mpi_environment.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/error.h"
#include "launch/cli/options.h"
#include "trainer/config/config_check.h"
#include "trainer/data/data_source.h"
#include "trainer/loop/trainer.h"
#include "support/temp_dir.h"
#include "support/test_support.h"

namespace ddp {
namespace {

// Small enough that a Trainer builds in milliseconds.
TrainConfig tiny_config() {
  TrainConfig c;
  c.data.kind = "synthetic";
  c.mlp.layer_widths = {10, 8, 10};
  c.loss = LossKind::MeanSquaredError;
  c.loss_name = "mse";
  c.batch_size = 16;
  c.steps = 2;
  c.log_every = 1000;
  c.data.synthetic_train_samples = 64;
  c.data.synthetic_test_samples = 16;
  return c;
}

// What the command line says about these flags: parse_options' message, and
// main's world check after it (main prefixes "ddp_train: error (rank R on
// HOST): " to this text). "" when both accept them.
std::string command_line_refusal(const std::string& flags, int world_size = 1) {
  std::vector<std::string> words = {"ddp_train"};
  std::istringstream in(flags);
  for (std::string w; in >> w;) words.push_back(w);
  std::vector<const char*> argv;
  for (const std::string& w : words) argv.push_back(w.c_str());
  try {
    const ParsedOptions parsed = parse_options(static_cast<int>(argv.size()), argv.data());
    check_config_for_world(parsed.config, world_size);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// The Trainer's refusal of `c` on one rank; "" when it builds.
std::string trainer_refusal(const TrainConfig& c) {
  CpuBackend cpu(1);
  SingleProcessCommunicator comm;
  try {
    Trainer t(c, cpu, comm, load_train_test(c.data, c.seed));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

struct BadValue {
  std::string flags;                      // the command line that sets it
  std::function<void(TrainConfig&)> set;  // the same value, set in code
};

// Fresh bad values each run (reproduce with DDP_TEST_SEED); each exact in
// binary and in decimal, so flag and field hold the same number.
std::vector<BadValue> bad_values(std::mt19937_64& rng) {
  const auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const double momentum = 1.0 + pick(0, 16) / 8.0;                   // SGD diverges at 1 and above
  const double backoff = pick(0, 1) ? 1.0 : 1.0 + pick(1, 8) / 4.0;  // 1: never backs off; above: grows
  const double min_scale = 65536.0 * (1 << pick(1, 10));             // above the default init scale 2^16
  const int64_t warmup = -pick(1, 1000);
  const double gamma = -pick(0, 8) / 4.0;                                         // 0 or negative
  const double beta1 = 1.0 + pick(0, 16) / 8.0, beta2 = 1.0 + pick(0, 16) / 8.0;  // AdamW's betas are in [0, 1)
  return {
      {"--momentum " + std::to_string(momentum), [=](TrainConfig& c) { c.momentum = momentum; }},
      {"--backoff-factor " + std::to_string(backoff), [=](TrainConfig& c) { c.loss_scaler.backoff_factor = backoff; }},
      {"--min-loss-scale " + std::to_string(min_scale), [=](TrainConfig& c) { c.loss_scaler.min_scale = min_scale; }},
      {"--warmup-steps " + std::to_string(warmup), [=](TrainConfig& c) { c.warmup_steps = warmup; }},
      {"--lr-schedule step --lr-gamma " + std::to_string(gamma), [=](TrainConfig& c) { c.lr_gamma = gamma; }},
      {"--nesterov --momentum 0",
       [](TrainConfig& c) {
         c.nesterov = true;
         c.momentum = 0;
       }},
      {"--device gpu", [](TrainConfig& c) { c.device = "gpu"; }},
      {"--optimizer adamw --beta1 " + std::to_string(beta1),
       [=](TrainConfig& c) {
         c.optimizer = OptimizerKind::AdamW;
         c.beta1 = beta1;
       }},
      {"--optimizer adamw --beta2 " + std::to_string(beta2),
       [=](TrainConfig& c) {
         c.optimizer = OptimizerKind::AdamW;
         c.beta2 = beta2;
       }},
      {"--optimizer adamw --eps 0",
       [](TrainConfig& c) {
         c.optimizer = OptimizerKind::AdamW;
         c.eps = 0;
       }},
  };
}

TEST(ConfigCheck, ADefaultConfigPasses) {
  EXPECT_NO_THROW(check_train_config(TrainConfig{}));
  EXPECT_NO_THROW(check_config_for_world(TrainConfig{}, 1));
  EXPECT_EQ(trainer_refusal(tiny_config()), "");
  EXPECT_EQ(command_line_refusal(""), "");
}

TEST(ConfigCheck, TheTrainerRefusesABadValueWithTheCommandLinesLine) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (const BadValue& bad : bad_values(rng)) {
    SCOPED_TRACE(bad.flags);
    const std::string expected = command_line_refusal(bad.flags);
    ASSERT_NE(expected, "") << "the command line accepts it";
    EXPECT_EQ(expected.find('\n'), std::string::npos) << expected;
    EXPECT_NE(expected.find(bad.flags.substr(bad.flags.rfind("--"), bad.flags.rfind(' ') - bad.flags.rfind("--"))),
              std::string::npos)
        << "the line does not name the flag: " << expected;
    TrainConfig c = tiny_config();
    bad.set(c);
    EXPECT_EQ(trainer_refusal(c), expected);
    EXPECT_THROW(check_train_config(c), Error);
  }
}

TEST(ConfigCheck, TheTrainerRefusesATestHookRankTheWorldDoesNotHave) {
  std::mt19937_64 rng(test::test_seed());
  const int rank = std::uniform_int_distribution<int>(1, 64)(rng);
  const std::string expected =
      command_line_refusal("--inject-overflow 2 --inject-overflow-rank " + std::to_string(rank));
  ASSERT_NE(expected.find("no such rank"), std::string::npos) << expected;
  TrainConfig c = tiny_config();
  c.inject_overflow_steps = {2};
  c.inject_overflow_rank = rank;
  EXPECT_EQ(trainer_refusal(c), expected);
}

// --zero-shard-size: a given size that does not divide the world is refused
// as on the command line; without one, a node's ranks when the nodes are
// equal blocks that divide the world, else the world; --zero 0 shards over
// nothing, so its group is the world whatever is given.
TEST(ConfigCheck, TheShardSizeIsTheGivenOneANodeOrTheWorld) {
  std::mt19937_64 rng(test::test_seed());
  const int g = std::uniform_int_distribution<int>(2, 16)(rng);
  TrainConfig c = tiny_config();
  c.zero_stage = 1;
  c.zero_shard_size = g;
  EXPECT_EQ(resolve_zero_shard_size(c, 4 * g, 0), g);
  EXPECT_THROW(resolve_zero_shard_size(c, g + 1, 0), Error);
  EXPECT_THROW(resolve_zero_shard_size(c, g - 1, g), Error);
  EXPECT_EQ(command_line_refusal("--zero 1 --zero-shard-size " + std::to_string(g)),
            "--zero-shard-size " + std::to_string(g) + " does not divide the world of 1 ranks into groups");
  c.zero_shard_size = 0;
  EXPECT_EQ(resolve_zero_shard_size(c, 4 * g, g), g);      // four nodes of g
  EXPECT_EQ(resolve_zero_shard_size(c, 4 * g, 0), 4 * g);  // unequal nodes
  EXPECT_EQ(resolve_zero_shard_size(c, g + 1, g), g + 1);  // a node's size that does not divide
  EXPECT_EQ(resolve_zero_shard_size(c, 4 * g, 1), 4 * g);  // one rank per host: no groups of one
  c.zero_stage = 0;
  c.zero_shard_size = g;
  EXPECT_EQ(resolve_zero_shard_size(c, 4 * g, g), 4 * g);
}

// A node is a block when its ranks are consecutive from a multiple of its
// size: mpirun's --map-by slot on equal hosts, not --map-by node.
TEST(ConfigCheck, ANodeIsABlockOfConsecutiveRanksFromAMultipleOfItsSize) {
  EXPECT_EQ(node_block_candidate(5, 1, 4, 4), 4);  // ranks 4-7, this one the second
  EXPECT_EQ(node_block_candidate(0, 0, 1, 0), 1);
  EXPECT_EQ(node_block_candidate(6, 1, 4, 4), 0);  // rank 6 second: the node's ranks are not consecutive
  EXPECT_EQ(node_block_candidate(3, 1, 2, 2), 2);  // ranks 2-3
  EXPECT_EQ(node_block_candidate(2, 0, 4, 2), 0);  // starts at 2 with 4 ranks: not a multiple
}

// Checked without a Trainer: before the check, a Trainer would try to
// allocate activations for 2^31 rows.
TEST(ConfigCheck, BatchFactorsAbove2To30AreRefusedAsOnTheCommandLine) {
  std::mt19937_64 rng(test::test_seed());
  const int64_t rows = (int64_t{1} << 30) + std::uniform_int_distribution<int64_t>(1, int64_t{1} << 33)(rng);
  const std::pair<std::string, std::function<void(TrainConfig&)>> cases[] = {
      {"--batch-size " + std::to_string(rows), [=](TrainConfig& c) { c.batch_size = rows; }},
      {"--grad-accum " + std::to_string(rows), [=](TrainConfig& c) { c.grad_accum = rows; }},
      {"--global-batch " + std::to_string(rows), [=](TrainConfig& c) { c.global_batch = rows; }},
  };
  for (const auto& [flags, set] : cases) {
    SCOPED_TRACE(flags);
    const std::string expected = command_line_refusal(flags);
    ASSERT_NE(expected.find("above 2^30"), std::string::npos) << expected;
    TrainConfig c = tiny_config();
    set(c);
    try {
      check_train_config(c);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), expected);
    }
  }
}

// The values checked are those of the config the command line leaves: a
// config file's steps that --epochs drops leaves --epochs itself to check.
TEST(ConfigCheck, TheCommandLineChecksTheConfigItsWinsLeave) {
  std::mt19937_64 rng(test::test_seed());
  const test::TempDir temp_dir("config_check");
  const std::string& dir = temp_dir.path();
  std::ofstream(dir + "/steps.ini") << "steps = " << std::uniform_int_distribution<int>(1, 1000)(rng) << "\n";
  EXPECT_EQ(command_line_refusal("--config " + dir + "/steps.ini --epochs 0"), "--epochs must be positive");
  EXPECT_EQ(command_line_refusal("--config " + dir + "/steps.ini --epochs 2"), "");
}

}  // namespace
}  // namespace ddp
