// test_cli_eval_sample.cpp: --eval-every and --sample-every as a user runs
// them: a byte GPT prints "sample (step S): ..." at its steps; under
// mpiexec with 2 ranks both ranks evaluate at the same steps (no hang, one
// line per evaluation) and rank 0 alone prints the samples; every bad use
// (negative N, --sample-every on the MLP or on a tokenizer's vocabulary,
// with --bench, --eval-only, --predict, --generate) is one error line.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include "support/cli_test.h"
#include "support/test_support.h"

namespace ddp {
namespace {
namespace fs = std::filesystem;

const std::string kShape = " --model gpt --n-layer 1 --n-head 2 --n-embd 32 --block-size 16 --batch-size 8";

int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class CliEvalSample : public test::CliTest {
 protected:
  CliEvalSample() : CliTest("cli_eval_sample") {}
  void SetUp() override {
    std::mt19937_64 rng(test::test_seed());
    static const char* words[] = {"the ", "cat ", "sat ", "on ", "a ", "mat\n"};
    std::string text;
    while (text.size() < 3000) text += words[rng() % 6];
    std::ofstream(dir + "/text.txt", std::ios::binary) << text;
    // GPT-2 token ids as raw uint16: a tokenizer's vocabulary, not bytes.
    std::vector<uint16_t> tokens(4000);
    for (uint16_t& t : tokens) t = static_cast<uint16_t>(rng() % 50257);
    std::ofstream(dir + "/tokens.u16", std::ios::binary)
        .write(reinterpret_cast<const char*>(tokens.data()), static_cast<std::streamsize>(tokens.size() * 2));
    gpt = "--data text --train-text " + dir + "/text.txt" + kShape;
  }

  test::CommandResult trainer(const std::string& args) const { return run(args, 60); }

  void expect_refused(const std::string& args, std::initializer_list<std::string> words) const {
    const std::string metrics = dir + "/m.jsonl";
    fs::remove(metrics);
    const test::CommandResult r = trainer(args);
    EXPECT_EQ(r.exit_code, 1) << args << "\n" << r.output;
    const std::string line = test::single_error_line(r.output);
    EXPECT_FALSE(line.empty()) << args << ": not exactly one error line in\n" << r.output;
    for (const std::string& w : words)
      EXPECT_NE(line.find(w), std::string::npos) << args << ": '" << w << "' not in: " << line;
    EXPECT_EQ(line.find(".cpp:"), std::string::npos) << line;
    EXPECT_FALSE(fs::exists(metrics)) << args << ": wrote " << metrics;
  }

  std::string gpt;
};

TEST_F(CliEvalSample, AByteGptPrintsItsSamplesWithTheHeader) {
  const test::CommandResult r = trainer(gpt + " --steps 6 --sample-every 3 --sample-length 10 --log-every 100");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(count_of(r.output, "\nsample (step 3): "), 1) << r.output;
  EXPECT_EQ(count_of(r.output, "\nsample (step 6): "), 1) << r.output;
  EXPECT_EQ(count_of(r.output, "sample (step "), 2) << r.output;
  const test::CommandResult help = trainer("--help");
  for (const char* flag : {"--eval-every", "--sample-every", "--sample-length"})
    EXPECT_NE(help.output.find(flag), std::string::npos) << flag << " not in --help";
}

TEST_F(CliEvalSample, TwoRanksEvaluateAtTheSameStepsAndRankZeroAloneSamples) {
#if !defined(DDP_MPIEXEC)
  GTEST_SKIP() << "built without MPI";
#else
  // A rank that skipped an evaluation (a collective) or waited on a
  // sampling rank 0 would hang: the watchdog and timeout end that as a failure.
  const test::CommandResult r = test::run_command(
      "timeout -k 2 90 " + test::mpiexec_prefix(2) + test::trainer_command() + " " + gpt +
      " --steps 7 --eval-every 3 --sample-every 3 --sample-length 10 --log-every 100 --collective-timeout 60" +
      " --metrics " + dir + "/m.jsonl 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("world 2 (MPI)"), std::string::npos) << r.output;
  for (const char* step : {"3", "6", "7"})
    EXPECT_EQ(count_of(r.output, std::string("(step ") + step + "): test loss"), 1) << step << "\n" << r.output;
  EXPECT_EQ(count_of(r.output, "sample (step 3): "), 1) << r.output;
  EXPECT_EQ(count_of(r.output, "sample (step 6): "), 1) << r.output;
  EXPECT_EQ(count_of(r.output, "sample (step "), 2) << r.output;
  std::ifstream in(dir + "/m.jsonl");
  std::vector<int64_t> steps;
  for (std::string line; std::getline(in, line);)
    if (line.find("\"event\":\"eval\"") != std::string::npos)
      steps.push_back(std::stoll(line.substr(line.find("\"step\":") + 7)));
  EXPECT_EQ(steps, (std::vector<int64_t>{3, 6, 7}));
#endif
}

TEST_F(CliEvalSample, BadUsesAreRefusedInOneLine) {
  const std::string m = " --metrics " + dir + "/m.jsonl";
  const std::string text = gpt + " --steps 2" + m;
  expect_refused("--data synthetic --steps 2 --eval-every -1" + m, {"--eval-every must be >= 0"});
  expect_refused(text + " --sample-every -2", {"--sample-every must be >= 0"});
  expect_refused("--data synthetic --steps 2 --sample-every 5" + m, {"--sample-every needs --model gpt"});
  expect_refused("--data text --token-format raw-u16 --train-text " + dir + "/tokens.u16" + kShape +
                     " --vocab-size 50304 --steps 2 --sample-every 5" + m,
                 {"--sample-every: the data records no tokenizer", "50304 classes", "give --tokenizer gpt2"});
  expect_refused(text + " --sample-every 5 --sample-length 0", {"--sample-length"});
  expect_refused("--data synthetic --steps 2 --sample-length 10" + m, {"--sample-length needs --sample-every"});
  expect_refused(text + " --sample-every 5 --prompt abcabcabcabcabcab", {"--prompt is 17 tokens"});
  expect_refused(text + " --sample-every 5 --prompt ''", {"--prompt is empty"});
  expect_refused(text + " --sample-every 5 --top-k 300", {"--top-k 300"});
  expect_refused(text + " --sample-every 5 --temperature -1", {"--temperature"});
  expect_refused(text + " --prompt abc", {"--prompt needs --generate or --sample-every"});
  expect_refused("--data synthetic --predict " + dir + "/x.npy --predictions " + dir + "/p.npy --init-weights " + dir +
                     "/w.safetensors --eval-every 5",
                 {"--eval-every has no meaning with --predict"});
  for (const char* flag : {"--eval-every", "--sample-every"}) {
    const std::string f = std::string(flag) + " 5";
    expect_refused(gpt + " --bench " + f, {std::string(flag) + " has no meaning with --bench"});
    expect_refused(gpt + " --eval-only --init-weights " + dir + "/w.safetensors " + f,
                   {std::string(flag) + " has no meaning with --eval-only"});
    // A GPT's --predict is refused before its flags (a GPT's inference is --generate).
    expect_refused(gpt + " --predict " + dir + "/x.npy --predictions " + dir + "/p.npy --init-weights " + dir +
                       "/w.safetensors " + f,
                   {"--predict needs --model mlp"});
    expect_refused(kShape + " --init-weights " + dir + "/w.safetensors --generate 5 --prompt abc " + f,
                   {std::string(flag) + " has no meaning with --generate"});
  }
}

}  // namespace
}  // namespace ddp
