// test_gpt_recompute.cpp: the GPT at --recompute light and block against
// none on the CPU, in FP16 and in BF16: the same loss, gradient and logit
// bits over two accumulated micro-batches on 1 and 2 threads, and whole
// training runs (AdamW, grad-accum 2) with the same master weights and test
// loss; the MLP untouched by the setting. In FP16 only, as both formats
// hold 2-byte words and no buffer's size depends on which: the activation
// bytes measured from the buffers equal to gpt_activation_formula's by kind
// at every level, and the allocation tally's peak lower by the formula's
// difference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "kernels/buffer.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/half.h"
#include "support/gpt_micro_batches.h"
#include "support/lowp_format.h"
#include "support/precision_config.h"
#include "support/temp_dir.h"
#include "support/test_support.h"
#include "support/training_run_support.h"
#include "trainer/models/gpt/gpt_activation_bytes.h"
#include "trainer/models/gpt/gpt_model.h"
#include "trainer/models/loss_head.h"

namespace ddp {
namespace {

constexpr int kBatch = 3;
constexpr Recompute kLevels[] = {Recompute::None, Recompute::Light, Recompute::Block};

GptConfig tiny_gpt(Recompute level, AttentionPath attention = AttentionPath::Explicit) {
  GptConfig g;
  g.attention = attention;
  g.n_layer = 3;
  g.n_head = 2;
  g.n_embd = 48;
  g.block_size = 24;
  g.vocab_size = 128;
  g.real_vocab = 120;
  g.recompute = level;
  return g;
}

using test::same_halves;
using Inputs = test::GptStepInputs;

Inputs draw_inputs(std::mt19937_64& rng, const ParameterRegistry& reg, int real_vocab,
                   Precision precision = Precision::Fp16) {
  const size_t rows = static_cast<size_t>(kBatch) * tiny_gpt(Recompute::None).block_size;
  return test::draw_gpt_step_inputs(rng, reg, rows, real_vocab, precision);
}

struct Outcome : test::GptStepOutcome {
  GptActivationBytes measured;
  size_t peak_bytes = 0;
};

// Two micro-batches (the second accumulating), then an evaluation forward.
Outcome train(CpuBackend& cpu, const GptConfig& g, const Inputs& in) {
  GptModel model(cpu, g, kBatch);
  Outcome o;
  static_cast<test::GptStepOutcome&>(o) = test::run_gpt_micro_batches(cpu, model, kBatch, g.block_size, in);
  o.measured = model.activation_bytes_by_kind();
  o.peak_bytes = cpu.allocations().peak_bytes;
  return o;
}

// The numerics suites run for FP16 and for BF16 (Precisions/.../fp16, bf16).
class GptRecompute : public ::testing::TestWithParam<Precision> {};

TEST_P(GptRecompute, GradientsAreTheKeptActivationsBits) {
  const Precision p = GetParam();
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  CpuBackend reg_cpu(1, p);
  const Inputs in = draw_inputs(rng, GptModel(reg_cpu, tiny_gpt(Recompute::None), kBatch).parameters(),
                                tiny_gpt(Recompute::None).real_vocab, p);
  for (const AttentionPath attention : {AttentionPath::Explicit, AttentionPath::Fused})
    for (int threads : {1, 2}) {
      CpuBackend base_cpu(threads, p);
      const Outcome want = train(base_cpu, tiny_gpt(Recompute::None, attention), in);
      for (const float l : want.losses) ASSERT_TRUE(std::isfinite(l));
      for (const Recompute level : {Recompute::Light, Recompute::Block}) {
        SCOPED_TRACE(std::to_string(threads) + " threads, --recompute " + recompute_name(level) + ", --attention " +
                     attention_path_name(attention));
        CpuBackend cpu(threads, p);
        const Outcome got = train(cpu, tiny_gpt(level, attention), in);
        ASSERT_EQ(got.losses.size(), want.losses.size());
        for (size_t m = 0; m < got.losses.size(); ++m)
          EXPECT_EQ(test::bits_of(got.losses[m]), test::bits_of(want.losses[m]))
              << "micro-batch " << m << ": " << got.losses[m] << " vs " << want.losses[m];
        EXPECT_TRUE(same_halves(got.grads, want.grads)) << "a gradient differs from --recompute none's";
        EXPECT_TRUE(same_halves(got.logits, want.logits)) << "the evaluation logits differ";
      }
    }
}

void expect_kinds_equal(const GptActivationBytes& got, const GptActivationBytes& want) {
  EXPECT_EQ(got.attention, want.attention);
  EXPECT_EQ(got.mlp, want.mlp);
  EXPECT_EQ(got.layernorm, want.layernorm);
  EXPECT_EQ(got.residual, want.residual);
}

TEST(GptRecompute, ActivationBytesAreTheFormulas) {
  CpuBackend cpu(1);
  for (const int batch : {1, kBatch}) {
    for (const Recompute level : kLevels) {
      SCOPED_TRACE(std::string("--recompute ") + recompute_name(level) + ", batch " + std::to_string(batch));
      const GptConfig g = tiny_gpt(level);
      const GptModel model(cpu, g, batch);
      expect_kinds_equal(model.activation_bytes_by_kind(), gpt_activation_formula(g, batch, level));
      EXPECT_EQ(model.activation_bytes(), gpt_activation_formula(g, batch, level).total());
    }
  }
  // The header's per-layer totals: what one more layer costs.
  const double r = static_cast<double>(kBatch) * 24;
  const double rc = r * 48;
  const double s = static_cast<double>(kBatch) * 2 * 24 * 24;
  const double per_layer[] = {4 * rc + 2 * (2 * rc + 8 * r) + 2 * (4 * rc + s) + 16 * rc, 4 * rc + 2 * (4 * rc + s),
                              2 * rc};
  for (size_t i = 0; i < 3; ++i) {
    GptConfig deeper = tiny_gpt(kLevels[i]);
    deeper.n_layer += 1;
    EXPECT_EQ(gpt_activation_formula(deeper, kBatch, kLevels[i]).total() -
                  gpt_activation_formula(tiny_gpt(kLevels[i]), kBatch, kLevels[i]).total(),
              per_layer[i])
        << recompute_name(kLevels[i]);
  }
}

TEST(GptRecompute, PeakMemoryFallsByThePredictedAmount) {
  std::mt19937_64 rng(test::test_seed());
  CpuBackend reg_cpu(1);
  const GptConfig none = tiny_gpt(Recompute::None);
  const Inputs in = draw_inputs(rng, GptModel(reg_cpu, none, kBatch).parameters(), none.real_vocab);
  CpuBackend none_cpu(2);
  const Outcome base = train(none_cpu, none, in);
  double previous = 0;
  for (const Recompute level : {Recompute::Light, Recompute::Block}) {
    SCOPED_TRACE(std::string("--recompute ") + recompute_name(level));
    CpuBackend cpu(2);
    const Outcome got = train(cpu, tiny_gpt(level), in);
    expect_kinds_equal(got.measured, gpt_activation_formula(tiny_gpt(level), kBatch, level));
    const double predicted = gpt_activation_formula(none, kBatch, Recompute::None).total() -
                             gpt_activation_formula(tiny_gpt(level), kBatch, level).total();
    EXPECT_GT(predicted, previous) << "each level keeps less than the one before";
    previous = predicted;
    EXPECT_EQ(static_cast<double>(base.peak_bytes) - static_cast<double>(got.peak_bytes), predicted)
        << "peaks " << base.peak_bytes << " and " << got.peak_bytes;
  }
}

TrainConfig gpt_run(const std::string& text_path) {
  return test::gpt_text_run(tiny_gpt(Recompute::None), text_path, 24, 128, 5);
}

size_t differing(const std::vector<float>& a, const std::vector<float>& b) {
  size_t differ = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) differ += test::bits_of(a[i]) != test::bits_of(b[i]);
  return differ;
}

// Through the trainer: several AdamW steps of two accumulated
// micro-batches; the master weights and test loss are none's bits.
TEST_P(GptRecompute, TrainingRunsGiveTheSameBits) {
  const Precision p = GetParam();
  const test::TempDir temp_dir("gpt_recompute");
  std::mt19937_64 rng(test::test_seed());
  std::string text;
  while (text.size() < 12000) text += static_cast<char>('a' + rng() % 20);
  const std::string path = temp_dir.path() + "/text.txt";
  std::ofstream(path, std::ios::binary) << text;
  TrainConfig c = test::in_precision(gpt_run(path), p);
  for (const int threads : {1, 2}) {
    c.gpt.recompute = Recompute::None;
    CpuBackend base_cpu(threads, p);
    const test::TrainingRun want = test::train_with(base_cpu, c);
    ASSERT_TRUE(std::isfinite(want.summary.test_loss));
    for (const Recompute level : {Recompute::Light, Recompute::Block}) {
      SCOPED_TRACE(std::to_string(threads) + " threads, --recompute " + recompute_name(level));
      c.gpt.recompute = level;
      CpuBackend cpu(threads, p);
      const test::TrainingRun got = test::train_with(cpu, c);
      EXPECT_EQ(got.summary.test_loss, want.summary.test_loss)
          << got.summary.test_loss << " vs " << want.summary.test_loss;
      EXPECT_EQ(differing(got.master, want.master), 0u) << "of " << want.master.size() << " master weights";
    }
  }
}

// The MLP reads no GPT setting: a config that says block trains its bits.
TEST_P(GptRecompute, TheMlpIsUnaffected) {
  const Precision p = GetParam();
  TrainConfig c;
  c.data.kind = "synthetic";
  c.mlp.layer_widths = {10, 16, 10};
  c.loss = LossKind::MeanSquaredError;
  c.loss_name = "mse";
  c.data.synthetic_train_samples = 128;
  c.data.synthetic_test_samples = 32;
  c.batch_size = 8;
  c.grad_accum = 2;
  c.steps = 4;
  c.log_every = 1000000;
  c.seed = test::test_seed() % 100000;
  c = test::in_precision(c, p);
  CpuBackend base_cpu(1, p);
  const test::TrainingRun want = test::train_with(base_cpu, c);
  c.gpt.recompute = Recompute::Block;
  CpuBackend cpu(1, p);
  const test::TrainingRun got = test::train_with(cpu, c);
  EXPECT_EQ(differing(got.master, want.master), 0u);
  EXPECT_EQ(got.summary.test_loss, want.summary.test_loss);
}

INSTANTIATE_TEST_SUITE_P(Precisions, GptRecompute, ::testing::ValuesIn(test::kBothPrecisions),
                         test::precision_test_name);

}  // namespace
}  // namespace ddp
