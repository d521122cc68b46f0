// test_gpt_model.cpp: the GPT (--model gpt) on the CPU backend: its
// tensors are nanoGPT's (names, shapes, order, initialisation, decay
// groups), a tiny model trains on a text (the loss falls far below the
// unigram level, so attention and position are used), runs are bit for bit
// repeatable, and a checkpoint of it resumes bitwise. The gradients against
// an independent double-precision reference: test_gpt_gradients.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>

#include "kernels/cpu/cpu_backend.h"
#include "support/recording_backend.h"
#include "support/temp_dir.h"
#include "support/test_support.h"
#include "support/training_run_support.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/checkpoint_dir.h"
#include "trainer/models/gpt/gpt_config.h"
#include "trainer/config/model_catalog.h"

namespace ddp {
namespace {
namespace fs = std::filesystem;

GptConfig tiny(int layers = 2) {
  GptConfig g;
  g.n_layer = layers;
  g.n_head = 2;
  g.n_embd = 32;
  g.block_size = 16;
  g.vocab_size = 256;
  g.real_vocab = 256;
  return g;
}

TEST(GptParameters, AreNanoGptsStateDictInBackwardOrder) {
  const GptConfig g = tiny(2);
  const ParameterRegistry r = gpt_parameters(g);
  std::vector<std::string> names;
  for (const ParameterTensor& t : r.tensors()) names.push_back(t.name);
  std::vector<std::string> want = {"transformer.ln_f.weight", "transformer.ln_f.bias"};
  for (int l = 1; l >= 0; --l) {
    const std::string p = "transformer.h." + std::to_string(l) + ".";
    for (const char* n : {"mlp.c_proj", "mlp.c_fc", "ln_2", "attn.c_proj", "attn.c_attn", "ln_1"}) {
      want.push_back(p + n + ".weight");
      want.push_back(p + n + ".bias");
    }
  }
  want.push_back("transformer.wpe.weight");
  want.push_back("transformer.wte.weight");
  EXPECT_EQ(names, want);
  auto shape = [&](const std::string& n) { return r[r.find(n)].shape; };
  EXPECT_EQ(shape("transformer.wte.weight"), (std::vector<int64_t>{256, 32}));
  EXPECT_EQ(shape("transformer.wpe.weight"), (std::vector<int64_t>{16, 32}));
  EXPECT_EQ(shape("transformer.h.0.attn.c_attn.weight"), (std::vector<int64_t>{96, 32}));
  EXPECT_EQ(shape("transformer.h.0.attn.c_proj.weight"), (std::vector<int64_t>{32, 32}));
  EXPECT_EQ(shape("transformer.h.0.mlp.c_fc.weight"), (std::vector<int64_t>{128, 32}));
  EXPECT_EQ(shape("transformer.h.0.mlp.c_proj.weight"), (std::vector<int64_t>{32, 128}));
  EXPECT_EQ(shape("transformer.h.1.ln_2.bias"), (std::vector<int64_t>{32}));
  // nanoGPT's optimizer groups: decay exactly the tensors of rank >= 2.
  for (const ParameterTensor& t : r.tensors()) EXPECT_EQ(t.weight_decay, t.shape.size() >= 2) << t.name;
  uint64_t count = 0;
  EXPECT_EQ(gpt_dims_problem(gpt_dims(g), count), "");
  EXPECT_EQ(count, r.parameter_count());
}

TEST(GptParameters, InitialisationIsNanoGpts) {
  const GptConfig g = tiny(3);
  const ParameterRegistry r = gpt_parameters(g);
  const std::vector<float> flat = r.initial_values(test::test_seed());
  auto stats = [&](const std::string& name) {
    const ParameterTensor& t = r[r.find(name)];
    double sum = 0, sq = 0;
    for (size_t i = 0; i < t.count; ++i) sum += flat[t.offset + i], sq += flat[t.offset + i] * flat[t.offset + i];
    const double mean = sum / t.count;
    return std::pair<double, double>{mean, std::sqrt(sq / t.count - mean * mean)};
  };
  const double proj_std = 0.02 / std::sqrt(2.0 * g.n_layer);
  for (const char* n :
       {"transformer.wte.weight", "transformer.h.1.attn.c_attn.weight", "transformer.h.2.mlp.c_fc.weight"})
    EXPECT_NEAR(stats(n).second, 0.02, 0.002) << n;
  for (const char* n : {"transformer.h.0.attn.c_proj.weight", "transformer.h.2.mlp.c_proj.weight"})
    EXPECT_NEAR(stats(n).second, proj_std, 0.1 * proj_std) << n;
  const ParameterTensor& gain = r[r.find("transformer.h.1.ln_1.weight")];
  const ParameterTensor& bias = r[r.find("transformer.h.1.mlp.c_fc.bias")];
  for (size_t i = 0; i < gain.count; ++i) ASSERT_EQ(flat[gain.offset + i], 1.0f);
  for (size_t i = 0; i < bias.count; ++i) ASSERT_EQ(flat[bias.offset + i], 0.0f);
}

TEST(GptParameters, DimsProblemsAreNamed) {
  uint64_t count = 0;
  EXPECT_NE(gpt_dims_problem({2, 3, 32, 16, 256, 256}, count).find("does not divide by n_head"), std::string::npos);
  EXPECT_NE(gpt_dims_problem({2, 2, 32, 16, 256, 300}, count).find("real_vocab 300 is above"), std::string::npos);
  EXPECT_NE(gpt_dims_problem({0, 2, 32, 16, 256, 256}, count).find("n_layer is 0"), std::string::npos);
  EXPECT_NE(gpt_dims_problem({2, 2, 32}, count).find("hold 3 values"), std::string::npos);
}

// A text with structure beyond single letters: words drawn from a small
// vocabulary, so the next byte depends on the previous ones.
std::string write_text(const std::string& dir) {
  static const char* words[] = {"the ", "cat ", "sat ", "on ", "a ", "mat ", "and ", "dog ", "ran ", "far ", "away. "};
  std::mt19937 rng(7);
  std::string text;
  while (text.size() < 24000) text += words[rng() % 11];
  const std::string path = dir + "/text.txt";
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

TrainConfig gpt_config(const std::string& text) {
  TrainConfig c;
  c.model = "gpt";
  c.gpt = tiny(2);
  // Named, not auto (explicit): the captured steps cover the fused path too.
  c.gpt.attention = AttentionPath::Fused;
  c.data.kind = "text";
  c.data.train_text = text;
  c.data.block_size = 16;
  c.data.val_fraction = 0.1;
  c.loss = LossKind::SoftmaxCrossEntropy;
  c.loss_name = "xent";
  c.optimizer = OptimizerKind::AdamW;
  c.lr = 3e-3;
  c.weight_decay = 0.1;
  c.batch_size = 16;
  c.log_every = 1000000;
  c.lr_schedule = LrScheduleKind::Constant;
  return c;
}

TEST(GptTraining, ATinyModelLearnsTheTextsStructure) {
  const test::TempDir temp_dir("gpt_train");
  const std::string& dir = temp_dir.path();
  TrainConfig c = gpt_config(write_text(dir));
  c.steps = 150;
  CpuBackend cpu(1);
  const test::TrainingRun run = test::train_with(cpu, c);
  // ln 256 = 5.55 at the start; the letters alone (about 12 of them) give
  // about 2.4; the words make most bytes predictable from the ones before.
  EXPECT_LT(run.summary.test_loss, 1.5) << "test loss " << run.summary.test_loss;
  EXPECT_EQ(run.summary.skipped_steps, 0);
}

// --cuda-graph for the GPT, emulated (recording_backend.h): the captured
// step reads the token ids and the per-position labels from the graph's own
// input buffers, copied in before each replay, so replayed steps train bit
// for bit as eager ones; nothing runs for the first time inside the capture.
TEST(GptTraining, ReplayedCapturedStepsTrainBitForBit) {
  const test::TempDir temp_dir("gpt_graph");
  const std::string& dir = temp_dir.path();
  TrainConfig c = gpt_config(write_text(dir));
  c.steps = 14;
  c.inject_overflow_steps = {6};
  CpuBackend cpu(1);
  const test::TrainingRun eager = test::train_with(cpu, c);
  c.cuda_graph = true;
  RecordingBackend graphs(DeviceKind::Cuda, /*can_capture=*/true);
  const test::TrainingRun replayed = test::train_with(graphs, c);
  EXPECT_GT(graphs.replays, c.steps / 2) << "most steps should be replays";
  EXPECT_EQ(replayed.summary.skipped_steps, eager.summary.skipped_steps);
  EXPECT_EQ(replayed.summary.test_loss, eager.summary.test_loss);
  std::string first;
  for (const std::string& op : graphs.first_seen_in_capture) first += op + " ";
  EXPECT_TRUE(graphs.first_seen_in_capture.empty()) << "first run inside the capture: " << first;
  ASSERT_EQ(replayed.master.size(), eager.master.size());
  size_t differ = 0;
  for (size_t i = 0; i < eager.master.size(); ++i)
    differ += test::bits_of(replayed.master[i]) != test::bits_of(eager.master[i]);
  EXPECT_EQ(differ, 0u) << "of " << eager.master.size() << " master weights";
}

TEST(GptTraining, RunsRepeatBitForBitAndResumeBitwise) {
  const test::TempDir temp_dir("gpt_resume");
  const std::string& dir = temp_dir.path();
  TrainConfig c = gpt_config(write_text(dir));
  c.steps = 12;
  CpuBackend cpu(1);
  const test::TrainingRun a = test::train_with(cpu, c);
  const test::TrainingRun b = test::train_with(cpu, c);
  ASSERT_EQ(a.master.size(), b.master.size());
  for (size_t i = 0; i < a.master.size(); ++i) ASSERT_EQ(test::bits_of(a.master[i]), test::bits_of(b.master[i])) << i;
  TrainConfig first = c;
  first.checkpoint_dir = dir + "/ck";
  first.stop_after_steps = 5;
  test::train_with(cpu, first);
  const TrainState s = read_checkpoint(dir + "/ck/" + checkpoint_file_name(5));
  EXPECT_EQ(s.model_kind, "gpt");
  EXPECT_EQ(s.tensors.front().name, "transformer.ln_f.weight");
  TrainConfig second = c;
  second.checkpoint_dir = dir + "/ck";
  second.resume = true;
  const test::TrainingRun resumed = test::train_with(cpu, second);
  for (size_t i = 0; i < a.master.size(); ++i)
    ASSERT_EQ(test::bits_of(resumed.master[i]), test::bits_of(a.master[i])) << "parameter " << i;
  // An MLP run refuses the GPT's checkpoint in one line.
  TrainConfig mlp;
  mlp.data.kind = "synthetic";
  mlp.mlp.layer_widths = {10, 10};
  mlp.loss = LossKind::MeanSquaredError;
  mlp.loss_name = "mse";
  mlp.steps = 7;
  mlp.checkpoint_dir = dir + "/ck";
  mlp.resume = true;
  try {
    test::train_with(cpu, mlp);
    ADD_FAILURE() << "an MLP resumed a GPT checkpoint";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model mismatch: the checkpoint holds a gpt, this run trains a mlp"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace ddp
