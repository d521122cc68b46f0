// test_cli_text_data.cpp: --data text as a user runs it. Every bad input is
// one line naming the file or flag, exit 1, and no output touched (metrics,
// checkpoint directory, weights). Good text data with the default --model
// mlp ends in the MLP's refusal of token ids: also one line, nothing
// written; with --model gpt it trains, and the GPT's flags are refused
// outside their sense.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "support/cli_test.h"
#include "support/test_support.h"

namespace ddp {
namespace {
namespace fs = std::filesystem;

class CliTextData : public test::CliTest {
 protected:
  CliTextData() : CliTest("cli_text") {}
  void SetUp() override {
    rng.seed(test::test_seed());
    text = dir + "/input.txt";
    write_text(text, 3000);
  }

  void write_text(const std::string& path, size_t bytes) {
    std::string s(bytes, ' ');
    for (char& ch : s) ch = static_cast<char>('a' + rng() % 26);
    std::ofstream(path, std::ios::binary) << s;
  }
  void write_binary(const std::string& path, const std::vector<uint8_t>& bytes) {
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }
  // An llm.c shard of `tokens` GPT-2 ids, version `version`.
  std::vector<uint8_t> llmc_shard(int32_t version, size_t tokens) {
    std::vector<uint8_t> out(1024 + 2 * tokens);
    const int32_t header[3] = {20240520, version, static_cast<int32_t>(tokens)};
    for (int i = 0; i < 3; ++i)
      for (int b = 0; b < 4; ++b) out[4 * i + b] = static_cast<uint8_t>(static_cast<uint32_t>(header[i]) >> (8 * b));
    for (size_t i = 0; i < tokens; ++i) {
      const auto id = static_cast<uint16_t>(rng() % 50257);
      out[1024 + 2 * i] = static_cast<uint8_t>(id & 0xff);
      out[1024 + 2 * i + 1] = static_cast<uint8_t>(id >> 8);
    }
    return out;
  }

  // Refused: exit 1, exactly one error line holding every word (and no
  // source-file place), and none of the outputs exists.
  void expect_refused(const std::string& args, std::initializer_list<std::string> words) const {
    const std::string metrics = dir + "/m.jsonl", ckpt = dir + "/ck", weights = dir + "/w.safetensors";
    const test::CommandResult r =
        run(args + " --steps 2 --metrics " + metrics + " --checkpoint-dir " + ckpt + " --save-weights " + weights, 30);
    EXPECT_EQ(r.exit_code, 1) << args << "\n" << r.output;
    const std::string line = test::single_error_line(r.output);
    EXPECT_FALSE(line.empty()) << args << ": not exactly one error line in\n" << r.output;
    for (const std::string& w : words)
      EXPECT_NE(line.find(w), std::string::npos) << args << ": '" << w << "' not in: " << line;
    EXPECT_EQ(line.find(".cpp:"), std::string::npos) << line;
    for (const std::string& out : {metrics, ckpt, weights}) EXPECT_FALSE(fs::exists(out)) << args << ": wrote " << out;
  }

  std::mt19937_64 rng;
  std::string text;
};

TEST_F(CliTextData, HelpListsTheTextFlagsAndTheGptGroup) {
  const test::CommandResult r = test::run_command(std::string(DDP_TRAIN_BINARY) + " --help 2>&1");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* flag : {"--train-text", "--val-text", "--val-fraction", "--token-format", "GPT (--model gpt",
                           "--block-size", "--vocab-size", "--model", "--n-layer", "--n-head", "--n-embd"})
    EXPECT_NE(r.output.find(flag), std::string::npos) << flag;
}

TEST_F(CliTextData, GoodTextEndsInTheMlpsRefusalOfTokenIds) {
  expect_refused("--data text --train-text " + text, {"the MLP reads feature vectors", "token ids", text});
  expect_refused("--data text --train-text " + text + " --val-text " + text + " --block-size 16",
                 {"the MLP reads feature vectors"});
}

TEST_F(CliTextData, MissingOrUnreadableTextIsRefused) {
  expect_refused("--data text", {"--train-text is required with --data text"});
  expect_refused("--data text --train-text ''", {"--train-text", "empty"});
  expect_refused("--data text --train-text " + dir + "/nope.txt", {dir + "/nope.txt", "cannot open"});
  expect_refused("--data text --train-text " + dir, {dir, "not a regular file"});
  expect_refused("--data text --train-text " + text + " --val-text " + dir + "/nope.txt", {dir + "/nope.txt"});
}

TEST_F(CliTextData, TextShorterThanAWindowIsRefused) {
  const size_t t = 8 + rng() % 100;
  write_text(dir + "/short.txt", t);
  expect_refused("--data text --train-text " + dir + "/short.txt --block-size " + std::to_string(t),
                 {dir + "/short.txt", std::to_string(t) + " tokens, fewer than --block-size " + std::to_string(t)});
  expect_refused(
      "--data text --train-text " + text + " --val-text " + dir + "/short.txt --block-size " + std::to_string(t),
      {dir + "/short.txt", "fewer than --block-size"});
}

TEST_F(CliTextData, AnEmptyValidationSplitIsRefused) {
  expect_refused("--data text --train-text " + text + " --val-fraction 0.001",
                 {text, "empty validation split", "--val-fraction 0.001"});
}

TEST_F(CliTextData, BadTokenFilesAreRefusedNamingTheField) {
  const std::string shard = dir + "/train.bin";
  write_binary(shard, llmc_shard(3, 500));
  expect_refused("--data text --train-text " + shard, {shard, "version 3", "header[1]"});
  std::vector<uint8_t> cut = llmc_shard(1, 500);
  cut.resize(cut.size() - 2 * (1 + rng() % 100));
  write_binary(shard, cut);
  expect_refused("--data text --train-text " + shard, {shard, "token count 500", "header[2]"});
  write_binary(dir + "/odd.u16", std::vector<uint8_t>(2 * (200 + rng() % 100) + 1, 7));
  expect_refused("--data text --token-format raw-u16 --train-text " + dir + "/odd.u16",
                 {dir + "/odd.u16", "odd byte length"});
  expect_refused("--data text --train-text " + text + " --vocab-size 97",  // letters 'a'.. are 97..122
                 {text, "token id", "at position 0", "--vocab-size 97"});
  write_binary(shard, llmc_shard(1, 500));
  expect_refused("--data text --train-text " + shard + " --val-text " + text, {text, "bytes", "llm.c"});
}

TEST_F(CliTextData, TextFlagsOutsideTheirSenseAreRefused) {
  expect_refused("--data text --train-text " + text + " --token-format u8", {"--token-format", "'u8'"});
  expect_refused("--data text --train-text " + text + " --val-text " + text + " --val-fraction 0.2",
                 {"--val-text and --val-fraction contradict each other"});
  for (const char* f : {"0", "1", "nan"})
    expect_refused("--data text --train-text " + text + " --val-fraction " + f, {"--val-fraction must be in (0, 1)"});
  expect_refused("--data text --train-text " + text + " --block-size 0", {"--block-size must be positive"});
  expect_refused("--data text --train-text " + text + " --block-size 2000000", {"--block-size", "at most 2^20"});
  expect_refused("--data text --train-text " + text + " --vocab-size -1", {"--vocab-size must be >= 0"});
  expect_refused("--data text --train-text " + text + " --vocab-size 100000000", {"--vocab-size", "at most 2^24"});
}

TEST_F(CliTextData, TextFlagsWithAnotherDataKindAreRefused) {
  expect_refused("--data synthetic --block-size 16", {"--block-size needs --data text"});
  expect_refused("--data synthetic --vocab-size 256", {"--vocab-size needs --data text"});
  expect_refused("--data synthetic --train-text " + text, {"--train-text is for --data text"});
  expect_refused("--data synthetic --val-fraction 0.2", {"--val-fraction is for --data text"});
}

// The command line wins over a config file: its --val-text drops the file's val-fraction.
TEST_F(CliTextData, TheCommandLinesValTextOverridesTheConfigsValFraction) {
  std::ofstream(dir + "/run.ini") << "data = text\ntrain-text = " << text << "\nval-fraction = 0.2\n";
  expect_refused("--config " + dir + "/run.ini --val-text " + text, {"the MLP reads feature vectors"});
  std::ofstream(dir + "/both.ini") << "data = text\ntrain-text = " << text
                                   << "\nval-fraction = 0.2\nval-text = " << text << "\n";
  expect_refused("--config " + dir + "/both.ini", {"--val-text and --val-fraction contradict each other"});
}

TEST_F(CliTextData, GptFlagsOutsideTheirSenseAreRefused) {
  const std::string gpt = "--data text --train-text " + text + " --block-size 16 --model gpt";
  expect_refused("--data text --train-text " + text + " --n-layer 2", {"--n-layer", "--model gpt"});
  expect_refused("--data synthetic --model gpt", {"--model gpt needs --data text"});
  expect_refused(gpt + " --n-embd 30 --n-head 4", {"--n-embd 30", "does not divide by --n-head 4"});
  expect_refused(gpt + " --layers 5,5", {"--layers", "--model mlp"});
  expect_refused(gpt + " --loss mse", {"--loss must be xent"});
  expect_refused("--data text --train-text " + text + " --model transformer", {"--model", "'transformer'", "mlp, gpt"});
}

// A GPT whose parameters cannot fit is one line before it is built: 100,000
// blocks 1024 wide (1.2 million tensors, 1.3 trillion parameters: 30 TB, on
// any host) and 48 blocks 65,536 wide (2.5 trillion). Registering the first once took hours (a quadratic
// name check), and the second failed only at an allocation.
TEST_F(CliTextData, AGptThatCannotFitInMemoryIsRefusedBeforeItIsBuilt) {
  const std::string gpt = "--data text --train-text " + text + " --block-size 16 --model gpt --batch-size 4";
  expect_refused(gpt + " --n-layer 100000 --n-embd 1024", {"parameters", "host memory", "--n-layer"});
  expect_refused(gpt + " --n-layer 48 --n-embd 65536 --n-head 64", {"parameters", "host memory", "--n-embd"});
}

TEST_F(CliTextData, AGptTrainsAndSavesNanoGptNames) {
  const std::string weights = dir + "/gpt.safetensors";
  const test::CommandResult r = test::run_command(
      "timeout -k 2 60 " + test::trainer_command() + " --data text --train-text " + text +
      " --model gpt --n-layer 2 --n-head 2 --n-embd 32 --block-size 16 --batch-size 8 --steps 3 --optimizer adamw"
      " --lr 1e-3 --checkpoint-dir " +
      dir + "/ck --save-weights " + weights + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("GPT 2 layers, 2 heads, 32 wide, context 16, vocabulary 256"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("bits/byte"), std::string::npos) << r.output;
  const std::string header = test::read_text(weights).substr(0, 4096);
  for (const char* name : {"transformer.wte.weight", "transformer.wpe.weight", "transformer.h.1.mlp.c_fc.weight",
                           "transformer.h.0.attn.c_attn.bias", "transformer.ln_f.bias"})
    EXPECT_NE(header.find(name), std::string::npos) << name;
  EXPECT_EQ(header.find("lm_head"), std::string::npos) << "the tied head is stored once, as wte";
  EXPECT_TRUE(fs::exists(dir + "/ck/ckpt-step000000000003.safetensors"));
}

}  // namespace
}  // namespace ddp
