// test_cli_gpt2_tokens.cpp: a GPT on GPT-2 tokens, as a user runs one. A
// text encoded with GPT-2's tokenizer into an llm.c shard trains a tiny GPT
// whose --sample-every lines and --generate output are decoded with GPT-2's
// tokenizer; its checkpoint and safetensors weights record "gpt2", a
// --tokenizer that contradicts the record is refused, and a byte run cannot
// resume it. Skips where the r50k_base ranks file is absent.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <fstream>
#include <string>
#include <vector>

#include "support/cli_test.h"
#include "support/test_support.h"
#include "trainer/data/llmc_token_writer.h"
#include "trainer/io/safetensors.h"
#include "trainer/tokenizer/gpt2_tokenizer.h"

namespace ddp {
namespace {
namespace fs = std::filesystem;

// 1 layer, 16 wide, context 8; GPT-2's vocabulary padded to 50304.
const std::string kShape = " --model gpt --n-layer 1 --n-head 2 --n-embd 16 --block-size 8 --batch-size 4";

std::string ranks_file() {
#ifdef DDP_GPT2_RANKS_FILE
  if (std::ifstream(DDP_GPT2_RANKS_FILE)) return DDP_GPT2_RANKS_FILE;
#endif
  return "";
}

class CliGpt2Tokens : public ::testing::Test {
 protected:
  void SetUp() override {
    ranks = ranks_file();
    if (ranks.empty())
      GTEST_SKIP() << "no r50k_base ranks file (launch/test.sh fetches it: launch/fetch_gpt2_ranks.sh data)";
    dir = test::make_temp_dir("cli_gpt2_tokens");
    tokenizer = std::make_unique<Gpt2Tokenizer>(Gpt2Tokenizer::from_ranks_file(ranks));
    std::string text;
    for (int i = 0; i < 40; ++i) text += "The quick brown fox jumps over the lazy dog. Caf\xc3\xa9 na\xc3\xafve! ";
    write_llmc_shard(dir + "/train.bin", tokenizer->encode(text));
    write_llmc_shard(dir + "/val.bin", tokenizer->encode(text.substr(0, 200)));
    data = " --data text --train-text " + dir + "/train.bin --val-text " + dir + "/val.bin" + kShape;
  }
  void TearDown() override {
    if (!dir.empty()) fs::remove_all(dir);
  }
  // stdout alone and the exit status; stderr into *err.
  test::CommandResult run(const std::string& args, std::string* err) const {
    const std::string err_path = dir + "/stderr.txt";
    // The fetched table, unless the case names its own.
    const std::string ranks_flag = args.find("--gpt2-ranks") == std::string::npos ? " --gpt2-ranks " + ranks : "";
    test::CommandResult r = test::run_command("timeout -k 2 120 " + std::string(DDP_TRAIN_BINARY) +
                                              " --device cpu --threads 1" + ranks_flag + " " + args + " 2>" + err_path);
    *err = test::read_text(err_path);
    return r;
  }

  std::string ranks;
  std::string dir;
  std::string data;
  std::unique_ptr<Gpt2Tokenizer> tokenizer;
};

TEST_F(CliGpt2Tokens, SamplesAndGenerationAreDecodedWithGpt2sTokenizerWhichTheFilesRecord) {
  std::string err;
  const test::CommandResult train =
      run(data +
              " --optimizer adamw --lr 3e-3 --steps 4 --sample-every 2 --sample-length 6 --seed 3"
              " --checkpoint-dir " +
              dir + "/ck --save-weights " + dir + "/w.safetensors",
          &err);
  ASSERT_EQ(train.exit_code, 0) << train.output << err;
  EXPECT_NE(train.output.find("vocabulary 50257 (padded to 50304)"), std::string::npos) << train.output;
  EXPECT_NE(train.output.find("sample (step 2): "), std::string::npos) << train.output;
  EXPECT_NE(train.output.find("sample (step 4): "), std::string::npos) << train.output;
  const std::string checkpoint = dir + "/ck/ckpt-step000000000004.safetensors";
  EXPECT_EQ(read_safetensors(checkpoint).metadata.at("tokenizer"), "gpt2");
  EXPECT_EQ(read_safetensors(dir + "/w.safetensors").metadata.at("tokenizer"), "gpt2");

  // --generate encodes the prompt with GPT-2's BPE (" quick brown" is two
  // tokens) and prints the generated ids decoded, on stdout alone.
  const std::string resume = " --model gpt --resume " + checkpoint;
  const test::CommandResult greedy = run(resume + " --generate 7 --prompt ' quick brown' --temperature 0", &err);
  ASSERT_EQ(greedy.exit_code, 0) << err;
  EXPECT_NE(err.find("generate: 7 tokens (gpt2) after a 2-token prompt"), std::string::npos) << err;
  EXPECT_FALSE(greedy.output.empty());
  // The same sample from the weights file, whose record names the tokenizer.
  const test::CommandResult from_weights =
      run(" --model gpt --n-layer 1 --n-head 2 --n-embd 16 --block-size 8 --init-weights " + dir +
              "/w.safetensors --generate 7 --prompt ' quick brown' --temperature 0",
          &err);
  ASSERT_EQ(from_weights.exit_code, 0) << err;
  EXPECT_EQ(from_weights.output, greedy.output);
  // The KV cache gives the whole-window path's tokens, greedy and seeded, past the context (8) too.
  for (const std::string& args : {resume + " --generate 12 --prompt ' quick brown' --temperature 0",
                                  resume + " --generate 12 --prompt ' lazy' --seed 9"}) {
    const test::CommandResult on = run(args + " --kv-cache on", &err);
    const test::CommandResult off = run(args + " --kv-cache off", &err);
    ASSERT_EQ(on.exit_code, 0) << err;
    EXPECT_EQ(on.output, off.output) << args;
  }

  // The record stands: a contradicting --tokenizer, or a byte run resuming, is refused in one line.
  const struct {
    std::string args, words;
  } refused[] = {
      {resume + " --generate 3 --prompt hi --tokenizer bytes", "--tokenizer bytes disagrees with the checkpoint"},
      {resume + " --generate 3 --prompt 'caf\xc3' --temperature 0", "--prompt is not valid UTF-8 at byte 3"},
      {resume + " --generate 3 --prompt hi --gpt2-ranks " + dir + "/val.bin",
       "--gpt2-ranks: the model's tokenizer is GPT-2's"},
      {" --data text --train-text " + dir + "/val.bin --token-format bytes" + kShape +
           " --vocab-size 50304 --steps 1 --resume " + checkpoint,
       "tokenizer mismatch: the checkpoint's model reads gpt2 tokens, this run's data bytes tokens"},
      {data + " --steps 1 --tokenizer bytes", "--tokenizer bytes disagrees with the data"},
  };
  for (const auto& c : refused) {
    const test::CommandResult r = run(c.args, &err);
    EXPECT_NE(r.exit_code, 0) << c.args;
    const std::string line = test::single_error_line(r.output + err);
    EXPECT_NE(line.find(c.words), std::string::npos) << c.args << "\n" << r.output << err;
  }
}

}  // namespace
}  // namespace ddp
