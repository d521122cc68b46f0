// test_gpt_gradients.cpp: the GPT's forward and backward in FP16 and in
// BF16 (GptModel on the CPU backend) against the independent
// double-precision reference (gpt_reference.h, itself pinned to PyTorch's
// float64 autograd by test_gpt_reference_vs_torch.cpp), on a tiny model
// (2 layers, 2 heads, C 32, T 16, a vocabulary of 60 padded to 64), from the
// same 16-bit weights.
//
// Tolerances (16-bit activations through two blocks, FP32 sums), FP16 / BF16:
// the loss within 5e-4 / 2e-3 relative; each tensor's gradient within 1% / 8%
// relative L2 error (||g - g_ref|| / ||g_ref||) and cosine similarity above
// 0.9999 / 0.999; the padded rows of wte get exactly zero gradient. Measured
// on six fresh seeds: FP16's loss within 3.5e-5 relative, the worst
// tensor's gradient error 0.12-0.20% (a LayerNorm gain or c_attn of block 0,
// the end of the chain); BF16's within 1.3e-4, and 0.9-1.7% (BF16's ulp is
// 8x FP16's).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "support/gpt_reference.h"
#include "kernels/buffer.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/half.h"
#include "support/lowp_format.h"
#include "support/test_support.h"
#include "trainer/models/gpt/gpt_model.h"
#include "trainer/models/loss_head.h"

namespace ddp {
namespace {

constexpr int kBatch = 3;

class GptGradients : public ::testing::TestWithParam<Precision> {};

TEST_P(GptGradients, BackwardMatchesTheDoubleReference) {
  const test::LowpFormat fmt{GetParam()};
  const bool bf16 = fmt.precision == Precision::Bf16;
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  GptConfig g;
  g.n_layer = 2;
  g.n_head = 2;
  g.n_embd = 32;
  g.block_size = 16;
  g.vocab_size = 64;
  g.real_vocab = 60;
  CpuBackend cpu(1, fmt.precision);
  GptModel model(cpu, g, kBatch);
  const ParameterRegistry& reg = model.parameters();

  // Weights: FP16 values (both sides use exactly these), wider than
  // nanoGPT's 0.02 so attention is far from uniform and every path matters.
  std::normal_distribution<float> normal(0.0f, 0.15f);
  std::vector<lowp16> weights(reg.flat_count(), fmt.narrow(0.0f));
  test::GptTensors ref_weights;
  for (const ParameterTensor& t : reg.tensors()) {
    std::vector<double>& w = ref_weights[t.name];
    for (size_t i = 0; i < t.count; ++i) {
      const bool gain = t.name.find("ln_") != std::string::npos && t.name.find(".weight") != std::string::npos;
      const lowp16 h = fmt.narrow((gain ? 1.0f : 0.0f) + normal(rng));
      weights[t.offset + i] = h;
      w.push_back(fmt.widen(h));
    }
  }
  const int T = g.block_size, rows = kBatch * T;
  std::vector<int32_t> tokens(rows), targets(rows);
  for (int i = 0; i < rows; ++i)
    tokens[i] = static_cast<int32_t>(rng() % 60), targets[i] = static_cast<int32_t>(rng() % 60);

  Buffer<lowp16> w_dev(cpu, weights.size());
  w_dev.upload(weights);
  Buffer<int32_t> tok_dev(cpu, rows), tgt_dev(cpu, rows);
  tok_dev.upload(tokens);
  tgt_dev.upload(targets);
  DeviceBatch batch;
  batch.token_ids = tok_dev.data();
  batch.labels = tgt_dev.data();
  batch.rows = kBatch;
  batch.labels_per_row = T;
  const ModelOutput out = model.forward(batch, WeightTable::flat(w_dev.data(), reg));
  ASSERT_EQ(out.rows, rows);
  ASSERT_EQ(out.width, 64);
  ASSERT_EQ(out.classes, 60);
  Buffer<float> loss(cpu, 1);
  loss_forward(cpu, LossKind::SoftmaxCrossEntropy, out, batch, loss.data(), nullptr);
  const float scale = 1024.0f;
  loss_backward(cpu, LossKind::SoftmaxCrossEntropy, out, batch, ScalarArg(scale), model.output_grad());
  Buffer<lowp16> grads(cpu, reg.flat_count());
  std::vector<lowp16> poison(reg.flat_count(), fmt.narrow(NAN));
  grads.upload(poison);
  size_t reported_end = 0;
  const WeightTable weights_lowp = WeightTable::flat(w_dev.data(), reg);
  model.backward(weights_lowp, GradTable::flat(grads.data(), reg), false, [&](size_t first, size_t end) {
    EXPECT_EQ(first, reported_end) << "tensors reported out of registry order";
    reported_end = end;
  });
  EXPECT_EQ(reported_end, reg.size()) << "not every tensor was reported ready";
  const std::vector<lowp16> got = grads.download();

  test::GptReferenceConfig rc;
  rc.n_layer = g.n_layer;
  rc.n_head = g.n_head;
  rc.n_embd = g.n_embd;
  rc.block_size = g.block_size;
  rc.vocab_padded = g.vocab_size;
  rc.vocab = g.real_vocab;
  const test::GptReferenceResult ref = test::gpt_reference_run(rc, ref_weights, tokens, targets, kBatch, T);
  EXPECT_NEAR(loss.download()[0], ref.loss, (bf16 ? 2e-3 : 5e-4) * ref.loss);

  double worst = 0;
  std::string worst_name;
  for (const ParameterTensor& t : reg.tensors()) {
    const std::vector<double>& want = ref.grads.at(t.name);
    double err = 0, norm = 0, dot = 0, got_norm = 0;
    for (size_t i = 0; i < t.count; ++i) {
      const double v = fmt.widen(got[t.offset + i]) / scale;
      ASSERT_TRUE(std::isfinite(v)) << t.name << " element " << i << " not written";
      err += (v - want[i]) * (v - want[i]);
      norm += want[i] * want[i];
      dot += v * want[i];
      got_norm += v * v;
    }
    const double rel = std::sqrt(err / std::max(norm, 1e-30));
    const double cosine = dot / std::sqrt(std::max(norm * got_norm, 1e-60));
    if (rel > worst) {
      worst = rel;
      worst_name = t.name;
    }
    EXPECT_LT(rel, bf16 ? 0.08 : 0.01) << t.name << ": relative L2 error " << rel;
    EXPECT_GT(cosine, bf16 ? 0.999 : 0.9999) << t.name << ": cosine " << cosine;
  }
  std::printf("%s: loss %.6f (reference %.6f); worst gradient relative L2 error %.3g (%s)\n",
              precision_name(fmt.precision), loss.download()[0], ref.loss, worst, worst_name.c_str());
  // The head gives the padded rows of wte no gradient, and no token reads them.
  const ParameterTensor& wte = reg[reg.find("transformer.wte.weight")];
  for (size_t i = 60 * 32; i < wte.count; ++i) ASSERT_EQ(fmt.widen(got[wte.offset + i]), 0.0f) << i;
}

INSTANTIATE_TEST_SUITE_P(Precisions, GptGradients, ::testing::ValuesIn(test::kBothPrecisions),
                         test::precision_test_name);

}  // namespace
}  // namespace ddp
