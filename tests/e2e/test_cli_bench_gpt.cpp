// test_cli_bench_gpt.cpp: `ddp_train --bench --model gpt` as a user runs it:
// random token windows of the flags' shape (no --data text), one JSON line
// on stdout whose tokens/s and TFLOP/s follow from its samples/s and the
// GPT's FLOPs per token; the GPT bench's wrong flags are refused in one line.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <string>

#include "support/cli_test.h"
#include "support/test_support.h"
#include "trainer/models/gpt/gpt_config.h"

namespace ddp {
namespace {

double json_number(const std::string& line, const std::string& key) {
  const size_t at = line.find("\"" + key + "\":");
  return at == std::string::npos ? std::nan("") : std::strtod(line.c_str() + at + key.size() + 3, nullptr);
}
std::string json_text(const std::string& line, const std::string& key) {
  const size_t at = line.find("\"" + key + "\":\"");
  if (at == std::string::npos) return "";
  const size_t from = at + key.size() + 4;
  return line.substr(from, line.find('"', from) - from);
}

// stderr (the device notice) dropped unless `redirect` says otherwise.
test::CommandResult bench(const std::string& args, const std::string& redirect = "2>/dev/null") {
  return test::run_command("timeout -k 2 60 " + test::trainer_command() + " --bench " + args + " " + redirect);
}

// A fresh small shape each run: the figures must follow from it, whatever it is.
TEST(CliBenchGpt, PrintsOneJsonLineWithTokensPerSecondAndMfu) {
  std::mt19937_64 rng(test::test_seed());
  SCOPED_TRACE("seed " + std::to_string(test::test_seed()));
  GptConfig g;
  g.n_layer = 1 + static_cast<int>(rng() % 2);
  g.n_head = 1 + static_cast<int>(rng() % 2);
  g.n_embd = 16 * g.n_head;
  g.block_size = 4 + static_cast<int>(rng() % 13);
  g.vocab_size = g.real_vocab = 32 + static_cast<int>(rng() % 64);
  const int batch = 2 + static_cast<int>(rng() % 3);
  const std::string args = "--model gpt --n-layer " + std::to_string(g.n_layer) + " --n-head " +
                           std::to_string(g.n_head) + " --n-embd " + std::to_string(g.n_embd) + " --block-size " +
                           std::to_string(g.block_size) + " --vocab-size " + std::to_string(g.vocab_size) +
                           " --batch-size " + std::to_string(batch) +
                           " --bench-warmup 1 --bench-steps 3 --peak-tflops 2";
  const test::CommandResult r = bench(args);
  ASSERT_EQ(r.exit_code, 0) << args << "\n" << r.output;
  ASSERT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << "stdout is the JSON line alone:\n" << r.output;
  const std::string& line = r.output;
  EXPECT_EQ(line.rfind("{\"event\":\"bench\"", 0), 0u) << line;
  const std::string shape = "gpt-l" + std::to_string(g.n_layer) + "-h" + std::to_string(g.n_head) + "-c" +
                            std::to_string(g.n_embd) + "-t" + std::to_string(g.block_size) + "-v" +
                            std::to_string(g.vocab_size);
  EXPECT_EQ(json_text(line, "model"), shape) << line;
  EXPECT_EQ(json_number(line, "timed_steps"), 3.0) << line;
  EXPECT_EQ(json_number(line, "batch_per_rank"), batch) << line;
  const double samples_per_s = json_number(line, "samples_per_s");
  const double tokens_per_s = json_number(line, "tokens_per_s");
  ASSERT_GT(samples_per_s, 0.0) << line;
  // A sample is one window of T tokens, each a prediction.
  EXPECT_NEAR(tokens_per_s, samples_per_s * g.block_size, 1e-9 * tokens_per_s) << line;
  const double tflops = tokens_per_s * gpt_flops_per_token(g) / 1e12;
  EXPECT_NEAR(json_number(line, "model_tflops"), tflops, 1e-6 * tflops) << line;
  EXPECT_NEAR(json_number(line, "mfu"), tflops / 2.0, 1e-6 * tflops) << line;
}

// The vocabulary defaults to bytes' 256 (no data to take it from).
TEST(CliBenchGpt, VocabularyDefaultsTo256) {
  const test::CommandResult r = bench(
      "--model gpt --n-layer 1 --n-head 1 --n-embd 16 --block-size 8 --batch-size 2 --bench-warmup 0 "
      "--bench-steps 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(json_text(r.output, "model"), "gpt-l1-h1-c16-t8-v256") << r.output;
}

// MLP lines say no tokens/s: a sample there is a feature vector.
TEST(CliBenchGpt, TheMlpLineHasNoTokensPerSecond) {
  const test::CommandResult r = bench("--layers 8,8,4 --batch-size 4 --bench-warmup 0 --bench-steps 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("tokens_per_s"), std::string::npos) << r.output;
}

TEST(CliBenchGpt, WrongFlagsAreRefusedInOneLine) {
  const std::string gpt = "--model gpt --n-layer 1 --n-head 2 --n-embd 16 --block-size 8 ";
  const struct {
    std::string args;
    std::string words;
  } cases[] = {
      {gpt + "--layers 5,5", "--layers needs --model mlp"},
      {"--layers 8,4 --n-head 2", "--n-head needs --model gpt"},
      {gpt + "--loss mse", "--loss must be xent"},
      {"--model gpt --n-embd 30 --n-head 4", "does not divide by --n-head 4"},
      {gpt + "--steps 5", "--steps has no meaning with --bench"},
      {gpt + "--vocab-size -3", "--vocab-size must be >= 0"},
      {"--model gpt --block-size 0", "--block-size must be positive"},
  };
  for (const auto& c : cases) {
    const test::CommandResult r = bench(c.args, "2>&1");
    EXPECT_EQ(r.exit_code, 1) << c.args << "\n" << r.output;
    const std::string error = test::single_error_line(r.output);
    EXPECT_NE(error.find(c.words), std::string::npos) << c.args << "\n" << r.output;
    EXPECT_EQ(error.find(".cpp"), std::string::npos) << r.output;
  }
  // Outside --bench a GPT still needs its token data.
  const test::CommandResult r =
      test::run_command(std::string(DDP_TRAIN_BINARY) + " --device cpu --model gpt --steps 1 2>&1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("--model gpt needs --data text"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace ddp
