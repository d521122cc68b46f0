// test_cli_recompute.cpp: --recompute as a user runs it. A GPT trained at
// light and block (AdamW, two accumulated micro-batches) writes the same
// weights file, byte for byte, and the same step losses and test loss
// (the metrics' round-trip text) as at none; a checkpoint written at none
// resumes at block and lands on the straight run's weights; a bad value is
// refused in one line, and with the MLP the flag needs --model gpt.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "support/cli_test.h"
#include "support/test_support.h"

namespace ddp {
namespace {

class CliRecompute : public test::CliTest {
 protected:
  CliRecompute() : CliTest("cli_recompute") {}
  void SetUp() override {
    std::mt19937_64 rng(test::test_seed());
    std::string s(4000, ' ');
    for (char& ch : s) ch = static_cast<char>('a' + rng() % 16);
    text = dir + "/input.txt";
    std::ofstream(text, std::ios::binary) << s;
  }

  std::string gpt_args() const {
    return "--model gpt --data text --train-text " + text +
           " --n-layer 2 --n-head 2 --n-embd 32 --block-size 16 --batch-size 4 --grad-accum 2 --steps 6 "
           "--optimizer adamw --lr 3e-3 --lr-schedule constant --log-every 1 --seed 3";
  }

  std::string text;
};

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The metrics' losses as written (the shortest text that parses back to
// each value: equal text is equal bits): every step's, then the summary's.
std::vector<std::string> losses_of(const std::string& metrics_path) {
  std::ifstream in(metrics_path);
  std::vector<std::string> losses;
  std::string line;
  while (std::getline(in, line)) {
    for (const char* key : {"\"loss\":", "\"test_loss\":"}) {
      const size_t at = line.find(key);
      if (at == std::string::npos) continue;
      const size_t start = at + std::string(key).size();
      losses.push_back(line.substr(start, line.find_first_of(",}", start) - start));
    }
  }
  return losses;
}

TEST_F(CliRecompute, EveryLevelWritesNonesWeightsAndLosses) {
  std::string want_weights;
  std::vector<std::string> want_losses;
  for (const char* level : {"none", "light", "block"}) {
    SCOPED_TRACE(std::string("--recompute ") + level);
    const std::string weights = dir + "/w-" + level + ".safetensors";
    const std::string metrics = dir + "/m-" + level + ".jsonl";
    const test::CommandResult r =
        run(gpt_args() + " --recompute " + level + " --save-weights " + weights + " --metrics " + metrics, 120);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const std::string got_weights = file_bytes(weights);
    const std::vector<std::string> got_losses = losses_of(metrics);
    ASSERT_FALSE(got_weights.empty());
    ASSERT_GE(got_losses.size(), 7u) << "six steps and the summary";
    if (want_weights.empty()) {
      want_weights = got_weights;
      want_losses = got_losses;
      continue;
    }
    EXPECT_TRUE(got_weights == want_weights) << "the weights file differs from --recompute none's";
    EXPECT_EQ(got_losses, want_losses);
  }
}

TEST_F(CliRecompute, ACheckpointResumesAtAnotherLevel) {
  const std::string straight = dir + "/straight.safetensors";
  const test::CommandResult a = run(gpt_args() + " --recompute none --save-weights " + straight, 120);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  const test::CommandResult first =
      run(gpt_args() + " --recompute none --stop-after-steps 3 --checkpoint-dir " + dir + "/ck", 120);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const std::string resumed = dir + "/resumed.safetensors";
  const test::CommandResult second =
      run(gpt_args() + " --recompute block --resume --checkpoint-dir " + dir + "/ck --save-weights " + resumed, 120);
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find("at step 3"), std::string::npos) << second.output;
  EXPECT_TRUE(file_bytes(resumed) == file_bytes(straight))
      << "the resumed run's weights differ from the straight run's";
}

TEST_F(CliRecompute, ABadValueIsRefusedInOneLine) {
  expect_refused_before_training(gpt_args() + " --recompute full",
                                 {"--recompute: 'full' is not one of none, light, block"});
  expect_refused_before_training("--data synthetic --steps 2 --recompute block", {"--recompute needs --model gpt"});
}

TEST_F(CliRecompute, HelpSaysWhatEachLevelKeeps) {
  const test::CommandResult r = test::run_command(std::string(DDP_TRAIN_BINARY) + " --help 2>&1");
  EXPECT_EQ(r.exit_code, 0);
  // --help wraps its descriptions: compare with the whitespace runs as single spaces.
  std::istringstream words_in(r.output);
  std::string help;
  for (std::string word; words_in >> word;) help += word + " ";
  for (const char* words : {"--recompute", "none (each block", "light (each block", "block (each block"})
    EXPECT_NE(help.find(words), std::string::npos) << words << " not in\n" << r.output;
}

}  // namespace
}  // namespace ddp
