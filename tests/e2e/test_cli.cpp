// test_cli.cpp: build/ddp_train as a user runs it: --help, the metrics
// records, and every bad input rejected with one line naming the problem,
// a non-zero exit, and no output file touched.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/checkpoint_dir.h"
#include "trainer/io/npy_io.h"
#include "support/cli_test.h"
#include "support/test_support.h"

namespace ddp {
namespace {
namespace fs = std::filesystem;

using RunResult = test::CommandResult;
using test::run_trainer;

std::string error_line(const test::CommandResult& r) { return test::single_error_line(r.output); }

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

void put_be32(std::vector<uint8_t>& v, uint32_t x) {
  for (int s = 24; s >= 0; s -= 8) v.push_back(static_cast<uint8_t>(x >> s));
}

std::vector<uint8_t> idx_images(uint32_t n, uint32_t rows, uint32_t cols) {
  std::vector<uint8_t> v = {0, 0, 0x08, 3};
  put_be32(v, n);
  put_be32(v, rows);
  put_be32(v, cols);
  for (uint32_t i = 0; i < n * rows * cols; ++i) v.push_back(static_cast<uint8_t>(i * 7));
  return v;
}

std::vector<uint8_t> idx_labels(uint32_t n) {
  std::vector<uint8_t> v = {0, 0, 0x08, 1};
  put_be32(v, n);
  for (uint32_t i = 0; i < n; ++i) v.push_back(static_cast<uint8_t>(i % 10));
  return v;
}

class Cli : public test::CliTest {
 protected:
  Cli() : CliTest("cli") {}
  void SetUp() override {
    write_bytes(dir + "/img", idx_images(40, 4, 4));
    write_bytes(dir + "/lab", idx_labels(40));
    metrics = dir + "/m.jsonl";
  }
  std::string idx_args(const std::string& img, const std::string& lab) const {
    return "--data idx --train-images " + img + " --train-labels " + lab + " --test-images " + dir +
           "/img --test-labels " + dir + "/lab --layers 16,8,10 --steps 2 --metrics " + metrics;
  }
  // A bad input must fail with one line containing every `words`, and write no metrics.
  void expect_rejected(const std::string& args, std::initializer_list<std::string> words) {
    const RunResult r = run_trainer(args);
    EXPECT_NE(r.exit_code, 0) << r.output;
    const std::string line = error_line(r);
    EXPECT_FALSE(line.empty()) << "no single error line in:\n" << r.output;
    for (const std::string& w : words) EXPECT_NE(line.find(w), std::string::npos) << "'" << w << "' not in: " << line;
    EXPECT_FALSE(fs::exists(metrics)) << "an output file was written before the error";
  }
  std::string metrics;
};

TEST_F(Cli, HelpListsOptionsWithDefaults) {
  const RunResult r = run_trainer("--help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* opt : {"--device", "--data", "--layers", "--batch-size", "--epochs", "--steps", "--lr-schedule",
                          "--loss-scale", "--init-scale", "--hysteresis", "--min-loss-scale", "--metrics",
                          "--checkpoint-dir", "--resume", "--save-weights", "--init-weights", "--config"})
    EXPECT_NE(r.output.find(opt), std::string::npos) << opt;
  EXPECT_NE(r.output.find("(=784,512,512,10)"), std::string::npos);
  EXPECT_NE(r.output.find("(=65536)"), std::string::npos);
}

TEST_F(Cli, TrainsOnIdxAndWritesValidMetrics) {
  const RunResult r = run_trainer(idx_args(dir + "/img", dir + "/lab") + " --log-every 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in(metrics);
  std::string line;
  int steps = 0, evals = 0, summaries = 0;
  while (std::getline(in, line)) {
    steps += line.find("\"event\":\"step\"") != std::string::npos;
    evals += line.find("\"event\":\"eval\"") != std::string::npos;
    summaries += line.find("\"event\":\"summary\"") != std::string::npos;
    if (line.find("\"event\":\"step\"") == std::string::npos) continue;
    for (const char* key : {"\"step\":", "\"epoch\":", "\"loss\":", "\"loss_scale\":", "\"skipped\":", "\"lr\":",
                            "\"grad_norm\":", "\"samples_per_s\":"}) {
      EXPECT_NE(line.find(key), std::string::npos) << key << " missing in " << line;
    }
  }
  EXPECT_EQ(steps, 2);
  EXPECT_GE(evals, 1);
  EXPECT_EQ(summaries, 1);
}

TEST_F(Cli, ConfigFileIsReadAndCommandLineWins) {
  std::ofstream(dir + "/c.ini") << "steps = 3\nlayers = 16,4,10\nlog-every = 1\n";
  const RunResult r = run_trainer(idx_args(dir + "/img", dir + "/lab") + " --config " + dir + "/c.ini");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("MLP 16-8-10"), std::string::npos) << r.output;  // --layers on the command line won
  EXPECT_NE(r.output.find("2 steps"), std::string::npos) << r.output;
}

TEST_F(Cli, MissingFile) { expect_rejected(idx_args(dir + "/nope", dir + "/lab"), {"nope"}); }

TEST_F(Cli, TruncatedIdx) {
  auto bytes = idx_images(40, 4, 4);
  bytes.resize(bytes.size() - 5);
  write_bytes(dir + "/short", bytes);
  expect_rejected(idx_args(dir + "/short", dir + "/lab"), {"short", "truncated"});
}

TEST_F(Cli, WrongIdxMagic) {
  auto bytes = idx_images(40, 4, 4);
  bytes[0] = 0x12;
  write_bytes(dir + "/magic", bytes);
  expect_rejected(idx_args(dir + "/magic", dir + "/lab"), {"magic"});
}

TEST_F(Cli, ImageLabelCountMismatch) {
  write_bytes(dir + "/lab39", idx_labels(39));
  expect_rejected(idx_args(dir + "/img", dir + "/lab39"), {"lab39", "40", "39"});
}

TEST_F(Cli, NpyUnsupportedDtypeAndShape) {
  // int16 features: unsupported dtype.
  std::string header = "{'descr': '<i2', 'fortran_order': False, 'shape': (4, 2), }";
  header.resize(118, ' ');
  header += '\n';
  std::vector<uint8_t> npy = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 118, 0};
  npy.insert(npy.end(), header.begin(), header.end());
  npy.resize(npy.size() + 16, 0);
  write_bytes(dir + "/x.npy", npy);
  const std::vector<float> y3d(8, 0.0f);
  save_npy_fp32(dir + "/y.npy", y3d.data(), {4, 2});
  save_npy_fp32(dir + "/x3.npy", y3d.data(), {2, 2, 2});
  const std::string tail =
      " --test-x " + dir + "/x.npy --test-y " + dir + "/y.npy --layers 2,2 --loss mse --steps 1 --metrics " + metrics;
  expect_rejected("--data npy --train-x " + dir + "/x.npy --train-y " + dir + "/y.npy" + tail, {"x.npy", "<i2"});
  expect_rejected("--data npy --train-x " + dir + "/x3.npy --train-y " + dir + "/y.npy" + tail, {"x3.npy", "shape"});
}

TEST_F(Cli, LayersDoNotMatchData) {
  const std::string base = "--data idx --train-images " + dir + "/img --train-labels " + dir + "/lab --test-images " +
                           dir + "/img --test-labels " + dir + "/lab --steps 1 --metrics " + metrics;
  expect_rejected(base + " --layers 15,8,10", {"--layers", "15", "16"});
  expect_rejected(base + " --layers 16,8,5", {"--layers", "5", "10"});
}

TEST_F(Cli, UnknownAndMalformedFlags) {
  expect_rejected("--no-such-flag --metrics " + metrics, {"no-such-flag"});
  expect_rejected("--batch-size many --metrics " + metrics, {"batch-size"});
  expect_rejected("--loss-scale static:-3 --metrics " + metrics, {"--loss-scale"});
  expect_rejected("--activation tanh --metrics " + metrics, {"--activation", "tanh"});
}

// Found by tests/fuzz/fuzz_config.cpp: Boost.Program_options formats an
// error by replacing %placeholders% until none is left, so a value or key
// holding one ("%value%") hung ddp_train for ever. Run under timeout(1): a
// regression fails with exit status 124 instead of hanging the suite.
TEST_F(Cli, PercentPlaceholdersInBadValuesAreReportedNotLooped) {
  std::ofstream(dir + "/value.ini") << "lr = %value%\n";
  std::ofstream(dir + "/key.ini") << "%canonical_option% = 1\n";
  const std::string trainer = "timeout 60 " + test::trainer_command() + " ";
  const std::pair<std::string, std::vector<std::string>> cases[] = {
      {"--config " + dir + "/value.ini", {"'lr'", "value"}},
      {"--config " + dir + "/key.ini", {"unrecognised option", "canonical_option"}},
      {"--lr %value%", {"'--lr'", "value"}},
      {"--%prefix%", {"unrecognised option", "prefix"}},
  };
  for (const auto& [args, words] : cases) {
    const RunResult r = test::run_command(trainer + args + " --metrics " + metrics + " 2>&1");
    ASSERT_NE(r.exit_code, 124) << args << ": still running after 60 s (placeholder loop)";
    EXPECT_NE(r.exit_code, 0) << args << ": " << r.output;
    const std::string line = error_line(r);
    EXPECT_FALSE(line.empty()) << args << ": no single error line in:\n" << r.output;
    for (const std::string& w : words) EXPECT_NE(line.find(w), std::string::npos) << "'" << w << "' not in: " << line;
  }
  EXPECT_FALSE(fs::exists(metrics));
}

TEST_F(Cli, CorruptOrForeignCheckpointIsRefusedAndKept) {
  // A real checkpoint from a run, then a corrupted copy and a foreign model's.
  const std::string ck = dir + "/ck";
  ASSERT_EQ(run_trainer(idx_args(dir + "/img", dir + "/lab") + " --checkpoint-dir " + ck).exit_code, 0);
  fs::remove(metrics);
  const std::string good = ck + "/" + checkpoint_file_name(2);
  ASSERT_TRUE(fs::exists(good));
  auto bytes = read_bytes(good);
  bytes[bytes.size() - 7] ^= 0x40;  // in a tensor's bytes: only the checksum can tell
  write_bytes(dir + "/corrupt.ddpckpt", bytes);
  const auto before = read_bytes(dir + "/corrupt.ddpckpt");
  expect_rejected(idx_args(dir + "/img", dir + "/lab") + " --resume " + dir + "/corrupt.ddpckpt",
                  {"corrupt.ddpckpt", "checksum mismatch"});
  EXPECT_EQ(read_bytes(dir + "/corrupt.ddpckpt"), before);
  std::string foreign = idx_args(dir + "/img", dir + "/lab") + " --resume " + good;
  foreign.replace(foreign.find("--layers 16,8,10"), 16, "--layers 16,4,10");
  expect_rejected(foreign, {"mismatch"});
  EXPECT_TRUE(fs::exists(good));
  // Bare --resume on a directory whose only checkpoint is corrupt fails; with a valid one it resumes.
  write_bytes(good, bytes);
  expect_rejected(idx_args(dir + "/img", dir + "/lab") + " --checkpoint-dir " + ck + " --resume", {"none is valid"});
}

TEST_F(Cli, AWeightsFileIsNotACheckpoint) {
  // Both are safetensors files; only a checkpoint carries the training state.
  const std::string weights = dir + "/w.safetensors";
  ASSERT_EQ(run_trainer(idx_args(dir + "/img", dir + "/lab") + " --save-weights " + weights).exit_code, 0);
  fs::remove(metrics);
  const auto before = read_bytes(weights);
  expect_rejected(idx_args(dir + "/img", dir + "/lab") + " --resume " + weights,
                  {"w.safetensors", "not a ddp_train checkpoint", "--init-weights"});
  EXPECT_EQ(read_bytes(weights), before);
}

}  // namespace
}  // namespace ddp
