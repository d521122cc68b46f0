// test_cli_attention.cpp: --attention as a user runs it. fused trains a
// GPT to explicit's losses within 1% (not its bits: the tiles sum in
// another order), auto is explicit on the CPU (the same weights file, byte
// for byte: fused was measured no faster there), a checkpoint written with one path resumes with the other (the
// path is not recorded), and a bad value, or the flag with the MLP, is
// refused in one line.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "support/cli_test.h"
#include "support/test_support.h"

namespace ddp {
namespace {

class CliAttention : public test::CliTest {
 protected:
  CliAttention() : CliTest("cli_attention") {}
  void SetUp() override {
    std::mt19937_64 rng(test::test_seed());
    // Text with structure to learn (words from a small vocabulary), so the
    // losses fall and a wrong gradient shows.
    const char* words[] = {"the ", "cat ", "sat ", "on ", "a ", "mat ", "and ", "dog ", "ran. "};
    std::string s;
    while (s.size() < 6000) s += words[rng() % 9];
    text = dir + "/input.txt";
    std::ofstream(text, std::ios::binary) << s;
  }

  std::string gpt_args(int steps) const {
    return "--model gpt --data text --train-text " + text +
           " --n-layer 2 --n-head 2 --n-embd 32 --block-size 40 --batch-size 4 --steps " + std::to_string(steps) +
           " --optimizer adamw --lr 3e-3 --lr-schedule constant --log-every 1 --seed 5";
  }

  std::string text;
};

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST_F(CliAttention, FusedTrainsToExplicitsLossesWithinOnePercent) {
  std::vector<double> losses[2];
  const char* paths[] = {"explicit", "fused"};
  for (int i = 0; i < 2; ++i) {
    const std::string metrics = dir + "/m-" + paths[i] + ".jsonl";
    const test::CommandResult r = run(gpt_args(40) + " --attention " + paths[i] + " --metrics " + metrics, 180);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    losses[i] = test::metrics_losses(metrics);
    ASSERT_GE(losses[i].size(), 41u) << "forty steps and the summary";
  }
  ASSERT_EQ(losses[0].size(), losses[1].size());
  EXPECT_LT(losses[0].back(), losses[0].front() * 0.8) << "the explicit run did not learn";
  bool any_differs = false;
  for (size_t i = 0; i < losses[0].size(); ++i) {
    EXPECT_NEAR(losses[1][i], losses[0][i], 0.01 * losses[0][i]) << "loss " << i;
    any_differs = any_differs || losses[1][i] != losses[0][i];
  }
  EXPECT_TRUE(any_differs) << "fused gave explicit's every loss: is it running at all?";
}

TEST_F(CliAttention, AutoIsExplicitOnTheCpuAndThePathIsNotRecorded) {
  const std::string explicit_path = dir + "/explicit.safetensors", automatic = dir + "/auto.safetensors";
  const std::string fused = dir + "/fused.safetensors";
  ASSERT_EQ(run(gpt_args(4) + " --attention explicit --save-weights " + explicit_path, 120).exit_code, 0);
  ASSERT_EQ(run(gpt_args(4) + " --attention fused --save-weights " + fused, 120).exit_code, 0);
  ASSERT_EQ(run(gpt_args(4) + " --save-weights " + automatic, 120).exit_code, 0);
  EXPECT_TRUE(file_bytes(explicit_path) == file_bytes(automatic)) << "auto's weights are not explicit's";
  EXPECT_FALSE(file_bytes(fused) == file_bytes(automatic)) << "fused's weights are explicit's bits: is it running?";
  // Two steps with explicit, a checkpoint, two more with fused.
  const std::string ck = dir + "/ck";
  const test::CommandResult first =
      run(gpt_args(4) + " --attention explicit --stop-after-steps 2 --checkpoint-dir " + ck, 120);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const test::CommandResult resumed =
      run(gpt_args(4) + " --attention fused --resume --checkpoint-dir " + ck, 120);
  EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
}

TEST_F(CliAttention, ABadValueIsRefusedInOneLine) {
  expect_refused_before_training(gpt_args(2) + " --attention flash",
                                 {"--attention: 'flash' is not one of explicit, fused, auto"});
  expect_refused_before_training("--data synthetic --steps 2 --attention fused", {"--attention needs --model gpt"});
  // The GPT's other memory setting likewise (it was once ignored by the MLP).
  expect_refused_before_training("--data synthetic --steps 2 --classifier-chunk 64",
                                 {"--classifier-chunk needs --model gpt"});
}

}  // namespace
}  // namespace ddp
