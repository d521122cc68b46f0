// test_cli_classifier_logits.cpp: --classifier-logits as a user runs it. A
// GPT trained with the chunked head's logits dropped (AdamW, two
// accumulated micro-batches) logs every step's loss within 0.1% of keep's
// and the same memory line but for the classifier, whose bytes equal its
// formula; a checkpoint written with keep resumes with drop; drop without
// --classifier-chunk, a bad value and the flag with the MLP are refused in
// one line; --help says what each keeps.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "support/cli_test.h"
#include "support/test_support.h"

namespace ddp {
namespace {

class CliClassifierLogits : public test::CliTest {
 protected:
  CliClassifierLogits() : CliTest("cli_classifier_logits") {}
  void SetUp() override {
    std::mt19937_64 rng(test::test_seed());
    std::string s(8000, ' ');
    for (char& ch : s) ch = static_cast<char>('a' + rng() % 16);
    text = dir + "/input.txt";
    std::ofstream(text, std::ios::binary) << s;
  }

  // 8 windows of 64 per micro-batch: 512 rows, chunks of 144 and more.
  std::string gpt_args() const {
    return "--model gpt --data text --train-text " + text +
           " --n-layer 2 --n-head 2 --n-embd 32 --block-size 64 --batch-size 8 --grad-accum 2 --steps 8 "
           "--optimizer adamw --lr 3e-3 --lr-schedule constant --log-every 1 --seed 3 --classifier-chunk 100";
  }

  std::string text;
};

TEST_F(CliClassifierLogits, DropTrainsWithinATenthOfAPercentOfKeep) {
  std::vector<double> runs[2];
  std::string outputs[2];
  for (const int drop : {0, 1}) {
    const std::string metrics = dir + "/m" + std::to_string(drop) + ".jsonl";
    const test::CommandResult r =
        run(gpt_args() + " --classifier-logits " + (drop ? "drop" : "keep") + " --metrics " + metrics, 120);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    runs[drop] = test::metrics_losses(metrics);
    outputs[drop] = r.output;
  }
  ASSERT_GE(runs[0].size(), 9u) << "eight steps and the summary";
  ASSERT_EQ(runs[1].size(), runs[0].size());
  for (size_t i = 0; i < runs[0].size(); ++i) EXPECT_NEAR(runs[1][i], runs[0][i], 1e-3 * runs[0][i]) << "loss " << i;
  // The classifier's kind: its bytes and formula, equal, and the formula drop's.
  const std::regex classifier(R"(classifier ([0-9.]+) MiB \[([0-9.]+) MiB = ([^\]]*)\])");
  std::smatch keep_match, drop_match;
  ASSERT_TRUE(std::regex_search(outputs[0], keep_match, classifier)) << outputs[0];
  ASSERT_TRUE(std::regex_search(outputs[1], drop_match, classifier)) << outputs[1];
  EXPECT_EQ(drop_match[1], drop_match[2]) << "allocated and formula differ";
  EXPECT_EQ(drop_match[3], "2PV + 4R + 2RC + 4VC (P: the largest chunk's rows)");
  EXPECT_LT(std::stod(drop_match[1]), std::stod(keep_match[1])) << "drop holds no less than keep";
}

TEST_F(CliClassifierLogits, AKeepCheckpointResumesWithDrop) {
  const test::CommandResult first = run(gpt_args() + " --stop-after-steps 4 --checkpoint-dir " + dir + "/ck", 120);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const test::CommandResult second =
      run(gpt_args() + " --classifier-logits drop --resume --checkpoint-dir " + dir + "/ck", 120);
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find("at step 4"), std::string::npos) << second.output;
}

TEST_F(CliClassifierLogits, RefusalsAreOneLine) {
  const std::string no_chunk = "--model gpt --data text --train-text " + text + " --steps 2 --classifier-logits drop";
  expect_refused_before_training(no_chunk, {"--classifier-logits drop needs --classifier-chunk ROWS"});
  expect_refused_before_training(gpt_args() + " --classifier-logits none",
                                 {"--classifier-logits: 'none' is not one of keep, drop"});
  expect_refused_before_training("--data synthetic --steps 2 --classifier-logits drop",
                                 {"--classifier-logits needs --model gpt"});
}

TEST_F(CliClassifierLogits, HelpSaysWhatEachKeeps) {
  const test::CommandResult r = test::run_command(std::string(DDP_TRAIN_BINARY) + " --help 2>&1");
  EXPECT_EQ(r.exit_code, 0);
  std::istringstream words_in(r.output);
  std::string help;
  for (std::string word; words_in >> word;) help += word + " ";
  for (const char* words : {"--classifier-logits", "keep (the chunks' gradients", "drop (each chunk's backward"})
    EXPECT_NE(help.find(words), std::string::npos) << words << " not in\n" << r.output;
}

}  // namespace
}  // namespace ddp
