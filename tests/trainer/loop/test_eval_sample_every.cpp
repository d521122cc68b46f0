// test_eval_sample_every.cpp: --eval-every N and --sample-every N in the
// training loop (one process, CPU backend). Which steps are evaluated (the
// metrics file's eval records): every N-th, epoch ends, the end, each once;
// a resumed run keeps the schedule. Neither flag changes training: the
// masters end bitwise equal to a run without them. A sample is printed
// after its step's evaluation line, is reproducible, and is exactly what
// --generate draws from that step's weights with seed --seed + step.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "kernels/cpu/cpu_backend.h"
#include "support/escaped_text_support.h"
#include "support/test_support.h"
#include "trainer/checkpoint/checkpoint_dir.h"
#include "trainer/modes/generation.h"
#include "trainer/loop/trainer.h"

namespace ddp {
namespace {
namespace fs = std::filesystem;

// Synthetic regression (MLP): `samples` training samples at batch 16.
TrainConfig mlp_config(int64_t samples) {
  TrainConfig c;
  c.data.kind = "synthetic";
  c.mlp.layer_widths = {10, 16, 10};
  c.loss = LossKind::MeanSquaredError;
  c.loss_name = "mse";
  c.batch_size = 16;
  c.lr = 0.05;
  c.momentum = 0.9;
  c.log_every = 1000;
  c.data.synthetic_train_samples = samples;
  c.data.synthetic_test_samples = 32;
  c.seed = test::test_seed();
  return c;
}

// A text whose next byte depends on the ones before (words), as bytes.
std::string write_text(const std::string& dir, uint64_t seed) {
  static const char* words[] = {"the ", "cat ", "sat ", "on ", "a ", "mat ", "and ", "dog ", "ran ", "far\n"};
  std::mt19937_64 rng(seed);
  std::string text;
  while (text.size() < 4000) text += words[rng() % 10];
  const std::string path = dir + "/text.txt";
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// A tiny byte GPT (1 block, 32 wide, context 16), AdamW at batch 8.
TrainConfig gpt_config(const std::string& text_path) {
  TrainConfig c;
  c.model = "gpt";
  c.gpt.n_layer = 1;
  c.gpt.n_head = 2;
  c.gpt.n_embd = 32;
  c.data.kind = "text";
  c.data.train_text = text_path;
  c.data.block_size = 16;
  c.data.val_fraction = 0.1;
  c.loss = LossKind::SoftmaxCrossEntropy;
  c.loss_name = "xent";
  c.optimizer = OptimizerKind::AdamW;
  c.lr = 3e-3;
  c.weight_decay = 0.1;
  c.batch_size = 8;
  c.log_every = 1000;
  c.seed = test::test_seed();
  return c;
}

struct RunResult {
  std::vector<float> master;   // packed, as a checkpoint holds them
  std::vector<int64_t> evals;  // the steps of the metrics file's eval records, in order
  std::string stdout_text;     // what rank 0 printed
};

// One run; its metrics go to `metrics` (replaced), its stdout is captured.
RunResult train(TrainConfig c, const std::string& metrics) {
  fs::remove(metrics);
  c.metrics_path = metrics;
  CpuBackend cpu(1);
  SingleProcessCommunicator comm;
  RunResult r;
  testing::internal::CaptureStdout();
  {
    Trainer t(c, cpu, comm, load_train_test(c.data, c.seed));
    t.prepare();
    t.run();
    r.master = t.snapshot().master_weights_fp32;
  }
  r.stdout_text = testing::internal::GetCapturedStdout();
  std::ifstream in(metrics);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find("\"event\":\"eval\"") == std::string::npos) continue;
    const size_t at = line.find("\"step\":");
    r.evals.push_back(std::stoll(line.substr(at + 7)));
  }
  return r;
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The sample lines of a run's stdout by step: "sample (step S): TEXT".
std::vector<std::pair<int64_t, std::string>> samples_of(const std::string& out) {
  std::vector<std::pair<int64_t, std::string>> found;
  for (const std::string& line : lines_of(out)) {
    if (line.rfind("sample (step ", 0) != 0) continue;
    const size_t close = line.find("): ");
    if (close == std::string::npos) {
      ADD_FAILURE() << "a sample line without its header: " << line;
      continue;
    }
    found.emplace_back(std::stoll(line.substr(13, close - 13)), test::unescaped(line.substr(close + 3)));
  }
  return found;
}

class EvalSampleEvery : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = test::make_temp_dir("eval_sample_every"); }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

TEST_F(EvalSampleEvery, EvaluatesEveryNthStepAndOnceAtTheEndWithMastersBitwiseUnchanged) {
  SCOPED_TRACE("seed " + std::to_string(test::test_seed()));
  TrainConfig c = mlp_config(4096);  // 256 steps per epoch: no epoch ends in 10 steps
  c.steps = 10;
  const RunResult plain = train(c, dir_ + "/plain.jsonl");
  EXPECT_EQ(plain.evals, (std::vector<int64_t>{10}));  // as before the flag: the end only
  c.eval_every = 3;
  const RunResult every3 = train(c, dir_ + "/every3.jsonl");
  EXPECT_EQ(every3.evals, (std::vector<int64_t>{3, 6, 9, 10}));
  EXPECT_TRUE(bitwise_equal(every3.master, plain.master)) << "--eval-every changed the training";
  c.eval_every = 5;  // the last step is on the schedule: evaluated once
  EXPECT_EQ(train(c, dir_ + "/every5.jsonl").evals, (std::vector<int64_t>{5, 10}));
  c.eval_every = 11;  // beyond the run: the end only
  EXPECT_EQ(train(c, dir_ + "/every11.jsonl").evals, (std::vector<int64_t>{10}));
}

TEST_F(EvalSampleEvery, AnEpochEndOnTheScheduleIsEvaluatedOnce) {
  TrainConfig c = mlp_config(64);  // 4 steps per epoch
  c.steps = 12;
  c.eval_every = 2;
  EXPECT_EQ(train(c, dir_ + "/a.jsonl").evals, (std::vector<int64_t>{2, 4, 6, 8, 10, 12}));
  c.steps = 10;
  c.eval_every = 3;  // epoch ends at 4 and 8, the schedule at 3, 6, 9
  EXPECT_EQ(train(c, dir_ + "/b.jsonl").evals, (std::vector<int64_t>{3, 4, 6, 8, 9, 10}));
}

TEST_F(EvalSampleEvery, AResumedRunKeepsTheSchedule) {
  SCOPED_TRACE("seed " + std::to_string(test::test_seed()));
  TrainConfig c = mlp_config(4096);
  c.steps = 12;
  c.eval_every = 4;
  const RunResult straight = train(c, dir_ + "/straight.jsonl");
  EXPECT_EQ(straight.evals, (std::vector<int64_t>{4, 8, 12}));
  TrainConfig first = c;
  first.checkpoint_dir = dir_ + "/ck";
  first.stop_after_steps = 6;
  EXPECT_EQ(train(first, dir_ + "/first.jsonl").evals, (std::vector<int64_t>{4, 6}));  // 6: the stop's evaluation
  TrainConfig second = c;
  second.checkpoint_dir = dir_ + "/ck";
  second.resume = true;
  const RunResult resumed = train(second, dir_ + "/second.jsonl");
  EXPECT_EQ(resumed.evals, (std::vector<int64_t>{8, 12}));  // the global step's schedule, not 6 + 4
  EXPECT_TRUE(bitwise_equal(resumed.master, straight.master));
}

TEST_F(EvalSampleEvery, GptEvaluatesOnTheScheduleAndSamplesWithoutChangingTraining) {
  SCOPED_TRACE("seed " + std::to_string(test::test_seed()));
  TrainConfig c = gpt_config(write_text(dir_, test::test_seed()));
  c.steps = 15;
  const RunResult plain = train(c, dir_ + "/plain.jsonl");
  EXPECT_EQ(plain.evals, (std::vector<int64_t>{15}));
  EXPECT_TRUE(samples_of(plain.stdout_text).empty());

  TrainConfig evaluated = c;
  evaluated.eval_every = 7;
  const RunResult e = train(evaluated, dir_ + "/eval.jsonl");
  EXPECT_EQ(e.evals, (std::vector<int64_t>{7, 14, 15}));
  EXPECT_TRUE(bitwise_equal(e.master, plain.master)) << "--eval-every changed the training";

  TrainConfig sampled = c;
  sampled.sample_every = 4;
  sampled.sample_length = 24;
  const RunResult s = train(sampled, dir_ + "/sample.jsonl");
  EXPECT_EQ(s.evals, (std::vector<int64_t>{15}));  // sampling adds no evaluation mid-run
  EXPECT_TRUE(bitwise_equal(s.master, plain.master)) << "--sample-every changed the training";
  const auto samples = samples_of(s.stdout_text);
  ASSERT_EQ(samples.size(), 3u) << s.stdout_text;
  for (size_t i = 0; i < samples.size(); ++i) {
    EXPECT_EQ(samples[i].first, 4 * static_cast<int64_t>(i + 1));
    EXPECT_EQ(samples[i].second.size(), 24u) << "--sample-length bytes";
  }
  // Reproducible: the seed is --seed + step, not a stream the run advances.
  const RunResult again = train(sampled, dir_ + "/again.jsonl");
  EXPECT_EQ(samples_of(again.stdout_text), samples);
}

TEST_F(EvalSampleEvery, ASampleFollowsItsStepsEvaluationLine) {
  TrainConfig c = gpt_config(write_text(dir_, test::test_seed()));
  c.steps = 10;
  c.eval_every = 5;
  c.sample_every = 5;
  c.sample_length = 8;
  const std::vector<std::string> lines = lines_of(train(c, dir_ + "/m.jsonl").stdout_text);
  int found = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].rfind("sample (step ", 0) != 0) continue;
    ++found;
    ASSERT_GT(i, 0u);
    const std::string step = lines[i].substr(13, lines[i].find(')') - 13);
    EXPECT_NE(lines[i - 1].find("(step " + step + "): test loss"), std::string::npos) << lines[i - 1];
  }
  EXPECT_EQ(found, 2);
  // The last step samples when the run's final evaluation comes after the loop, too: after that line.
  c.eval_every = 0;
  c.sample_every = 10;
  const std::vector<std::string> last = lines_of(train(c, dir_ + "/n.jsonl").stdout_text);
  size_t sample_at = 0, eval_at = 0;
  for (size_t i = 0; i < last.size(); ++i) {
    if (last[i].rfind("sample (step 10): ", 0) == 0) sample_at = i;
    if (last[i].find("(step 10): test loss") != std::string::npos) eval_at = i;
  }
  ASSERT_GT(sample_at, 0u);
  EXPECT_EQ(sample_at, eval_at + 1);
}

// The sample of step S is what --generate draws from the weights of step
// S (a checkpoint of them) with the same settings and seed --seed + S:
// the same FP16 forward, the same sampler.
TEST_F(EvalSampleEvery, ASampleIsWhatGenerateDrawsFromThatStepsWeights) {
  SCOPED_TRACE("seed " + std::to_string(test::test_seed()));
  TrainConfig c = gpt_config(write_text(dir_, test::test_seed()));
  c.steps = 12;
  c.stop_after_steps = 6;
  c.checkpoint_dir = dir_ + "/ck";
  c.sample_every = 6;
  c.sample_length = 30;
  const auto samples = samples_of(train(c, dir_ + "/m.jsonl").stdout_text);
  ASSERT_EQ(samples.size(), 1u);
  ASSERT_EQ(samples[0].first, 6);

  TrainConfig g;
  g.model = "gpt";
  g.resume = true;
  g.resume_path = find_newest_valid_checkpoint(c.checkpoint_dir).newest_valid;
  g.generate_tokens = 30;
  g.prompt = "\n";
  g.temperature = 0.8;
  g.top_k = 40;
  g.seed = c.seed + 6;
  const GenerationPlan plan = plan_generation(g);
  CpuBackend cpu(1);
  std::FILE* out = std::tmpfile();
  std::FILE* status = std::tmpfile();
  ASSERT_TRUE(out && status);
  run_generation(plan, cpu, out, status);
  std::rewind(out);
  std::string generated;
  for (int ch; (ch = std::fgetc(out)) != EOF;) generated += static_cast<char>(ch);
  std::fclose(out);
  std::fclose(status);
  EXPECT_EQ(samples[0].second, generated);
}

}  // namespace
}  // namespace ddp
