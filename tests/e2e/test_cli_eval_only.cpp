// test_cli_eval_only.cpp: `ddp_train --eval-only` as a user runs it: the
// weights of a checkpoint or of --init-weights evaluated on the test set
// give the figures the training run printed for them, on 1 rank and on 2
// (shards summed), and the run trains and writes nothing but --metrics.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "support/temp_dir.h"
#include "support/cli_test.h"
#include "support/test_support.h"

namespace ddp {
namespace {
namespace fs = std::filesystem;

const std::string kData = " --data synthetic --synthetic-samples 256 --layers 10,16,10 --batch-size 32";

test::CommandResult run_trainer(const std::string& args) {
  return test::run_command("timeout -k 2 120 " + test::trainer_command() + kData + " " + args + " 2>&1");
}

// The last "test loss X" figure in a run's output ("" when there is none).
std::string last_test_loss(const std::string& output) {
  static const std::regex loss("test loss ([0-9.]+)");
  std::string found;
  for (auto it = std::sregex_iterator(output.begin(), output.end(), loss); it != std::sregex_iterator(); ++it)
    found = (*it)[1];
  return found;
}

std::vector<std::string> listing(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(CliEvalOnly, EvaluatesACheckpointOrWeightsAsTheTrainingRunDid) {
  const test::TempDir temp_dir("eval-only");
  const std::string& dir = temp_dir.path();
  const std::string seed = " --seed " + std::to_string(test::test_seed() % 100000);
  const test::CommandResult train =
      run_trainer("--steps 12" + seed + " --checkpoint-dir " + dir + "/ck --save-weights " + dir + "/w");
  ASSERT_EQ(train.exit_code, 0) << train.output;
  const std::string trained = last_test_loss(train.output);
  ASSERT_FALSE(trained.empty()) << train.output;
  const std::vector<std::string> before = listing(dir + "/ck");

  const test::CommandResult from_weights =
      run_trainer("--eval-only --init-weights " + dir + "/w" + seed);  // the seed makes the synthetic test set
  ASSERT_EQ(from_weights.exit_code, 0) << from_weights.output;
  EXPECT_EQ(last_test_loss(from_weights.output), trained) << from_weights.output;
  EXPECT_NE(from_weights.output.find("eval-only (step 0)"), std::string::npos) << from_weights.output;

  const test::CommandResult from_checkpoint =
      run_trainer("--eval-only --resume --checkpoint-dir " + dir + "/ck --metrics " + dir + "/m.jsonl" + seed);
  ASSERT_EQ(from_checkpoint.exit_code, 0) << from_checkpoint.output;
  EXPECT_EQ(last_test_loss(from_checkpoint.output), trained) << from_checkpoint.output;
  EXPECT_NE(from_checkpoint.output.find("eval-only (step 12)"), std::string::npos) << from_checkpoint.output;
  EXPECT_EQ(from_checkpoint.output.find("step 1/"), std::string::npos) << "it trained: " << from_checkpoint.output;
  std::ifstream metrics(dir + "/m.jsonl");
  const std::string records((std::istreambuf_iterator<char>(metrics)), {});
  EXPECT_NE(records.find("\"eval_only\":true"), std::string::npos) << records;
  EXPECT_EQ(listing(dir + "/ck"), before) << "--eval-only wrote into the checkpoint directory";

#if defined(DDP_MPIEXEC)
  const test::CommandResult two =
      test::run_command("timeout -k 2 120 " + test::mpiexec_prefix(2) + test::trainer_command() + kData +
                        " --eval-only --init-weights " + dir + "/w" + seed + " 2>&1");
  ASSERT_EQ(two.exit_code, 0) << two.output;
  EXPECT_EQ(last_test_loss(two.output), trained) << two.output;  // shards summed: the same 4 digits
#endif
}

TEST(CliEvalOnly, FlagsThatTrainOrWriteAreRefusedInOneLine) {
  const test::TempDir temp_dir("eval-only-flags");
  const std::string& dir = temp_dir.path();
  ASSERT_EQ(run_trainer("--steps 2 --save-weights " + dir + "/w").exit_code, 0);
  const struct {
    std::string args;
    std::string words;
  } cases[] = {
      {"--eval-only", "--eval-only needs --resume or --init-weights"},
      {"--eval-only --init-weights " + dir + "/w --save-weights " + dir + "/w2",
       "--save-weights has no meaning with --eval-only"},
      {"--eval-only --init-weights " + dir + "/w --steps 3", "--steps has no meaning with --eval-only"},
      {"--eval-only --init-weights " + dir + "/w --checkpoint-dir " + dir + "/ck", "--checkpoint-dir has no meaning"},
      {"--eval-only --init-weights " + dir + "/w --bench", "contradict"},
  };
  for (const auto& c : cases) {
    const test::CommandResult r = run_trainer(c.args);
    EXPECT_NE(r.exit_code, 0) << c.args;
    EXPECT_NE(test::single_error_line(r.output).find(c.words), std::string::npos) << c.args << "\n" << r.output;
  }
  EXPECT_FALSE(fs::exists(dir + "/w2"));
  EXPECT_FALSE(fs::exists(dir + "/ck"));
}

}  // namespace
}  // namespace ddp
