// test_gpt_reference.cpp: the double-precision GPT-2 reference (gpt_reference.h)
// against itself: its hand-written backward against central finite
// differences of its own loss, on random elements of every tensor; causality;
// the padded vocabulary taking no part in the loss; bad input refused.
//
// Weights are drawn wider than nanoGPT's N(0, 0.02) init (linear weights
// N(0, 1/fan_in), LayerNorm gains 1 +- 0.3, non-zero biases): at 0.02 the
// attention is almost uniform and the q/k gradients are ~1e-6, so a wrong
// softmax backward would hide under the finite differences' own noise.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "support/gpt_reference.h"
#include "support/test_support.h"

namespace ddp::test {
namespace {

// 2 layers, 2 heads, C 32, T 16 (the tiny model); V 60 of Vp 64, so
// four padded rows and columns.
GptReferenceConfig tiny_config() { return GptReferenceConfig{2, 2, 32, 16, 64, 60}; }

GptTensors random_weights(const GptReferenceConfig& cfg, std::mt19937_64& rng) {
  GptTensors w;
  std::normal_distribution<double> normal(0.0, 1.0);
  for (const auto& s : gpt_tensor_shapes(cfg)) {
    std::vector<double>& t = w[s.name];
    t.resize(s.count());
    const bool is_norm = s.name.find("ln_") != std::string::npos;
    const bool is_bias = s.name.size() > 5 && s.name.compare(s.name.size() - 5, 5, ".bias") == 0;
    const bool is_embedding = s.name.find(".wte.") != std::string::npos || s.name.find(".wpe.") != std::string::npos;
    for (double& v : t) {
      if (is_norm && !is_bias)
        v = 1.0 + 0.3 * normal(rng);
      else if (is_bias)
        v = 0.1 * normal(rng);
      else if (is_embedding)
        v = 0.3 * normal(rng);
      else
        v = normal(rng) / std::sqrt(static_cast<double>(s.shape[1]));
    }
  }
  return w;
}

struct Batch {
  int batch = 2, seq = 16;
  std::vector<int32_t> tokens, targets;
};

Batch random_batch(const GptReferenceConfig& cfg, std::mt19937_64& rng, int batch, int seq) {
  Batch b{batch, seq, random_labels(rng, static_cast<size_t>(batch * seq), cfg.vocab),
          random_labels(rng, static_cast<size_t>(batch * seq), cfg.vocab)};
  return b;
}

double loss_of(const GptReferenceConfig& cfg, const GptTensors& w, const Batch& b) {
  return gpt_reference_run(cfg, w, b.tokens, b.targets, b.batch, b.seq, GptPass::forward_only).loss;
}

// The elements of one tensor to difference: random ones, and for wte also
// rows that the batch reads (embedding and head contributions both) and a
// padded row (no contribution).
std::vector<size_t> probe_indices(const GptTensorShape& s, const GptReferenceConfig& cfg, const Batch& b,
                                  std::mt19937_64& rng) {
  std::uniform_int_distribution<size_t> any(0, s.count() - 1);
  std::set<size_t> picks;
  while (picks.size() < std::min<size_t>(6, s.count())) picks.insert(any(rng));
  if (s.name == "transformer.wte.weight") {
    const size_t C = static_cast<size_t>(cfg.n_embd);
    std::uniform_int_distribution<size_t> col(0, C - 1);
    for (int i = 0; i < 3; ++i) picks.insert(static_cast<size_t>(b.tokens[static_cast<size_t>(i)]) * C + col(rng));
    picks.insert(static_cast<size_t>(cfg.vocab_padded - 1) * C + col(rng));
  }
  return {picks.begin(), picks.end()};
}

// Central differences in double, h = 1e-5. Their error is truncation
// ~h^2 |L'''| / 6 plus rounding ~eps |L| / h; measured against PyTorch float64
// autograd on this model (two seeds, every tensor): 1e-10 absolute at h = 1e-5
// (1e-9 at h = 1e-6, rounding-bound). The relative error is therefore taken
// against max(|analytic|, 1e-3): there a 1e-6 relative error is ten times the
// noise; a gradient below 1e-3 (the median is ~2e-2) is held to 1e-9
// absolute, still far below a real mistake, which is of the gradient's size.
TEST(GptReference, GradientsMatchFiniteDifferences) {
  const uint64_t seed = test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const GptReferenceConfig cfg = tiny_config();
  GptTensors w = random_weights(cfg, rng);
  const Batch b = random_batch(cfg, rng, 2, cfg.block_size);
  const GptReferenceResult ref = gpt_reference_run(cfg, w, b.tokens, b.targets, b.batch, b.seq);
  ASSERT_TRUE(std::isfinite(ref.loss));
  ASSERT_EQ(ref.grads.size(), gpt_tensor_shapes(cfg).size());
  const double h = 1e-5, floor = 1e-3;
  double worst = 0;
  for (const auto& s : gpt_tensor_shapes(cfg)) {
    std::vector<double>& t = w.at(s.name);
    const std::vector<double>& analytic = ref.grads.at(s.name);
    for (size_t i : probe_indices(s, cfg, b, rng)) {
      const double saved = t[i];
      t[i] = saved + h;
      const double up = loss_of(cfg, w, b);
      t[i] = saved - h;
      const double down = loss_of(cfg, w, b);
      t[i] = saved;
      const double numeric = (up - down) / (2 * h);
      const double rel = std::fabs(numeric - analytic[i]) / std::max(std::fabs(analytic[i]), floor);
      worst = std::max(worst, rel);
      EXPECT_LT(rel, 1e-6) << s.name << "[" << i << "]: analytic " << analytic[i] << ", finite difference " << numeric;
    }
  }
  std::printf("worst relative error %.3g\n", worst);
}

// Changing the token at position t0 of sample 0 leaves that sample's logits
// before t0 and all of sample 1 bitwise unchanged, and changes position t0's.
TEST(GptReference, LaterTokensDoNotChangeEarlierLogits) {
  const uint64_t seed = test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const GptReferenceConfig cfg = tiny_config();
  const GptTensors w = random_weights(cfg, rng);
  Batch b = random_batch(cfg, rng, 2, cfg.block_size);
  const size_t t0 = std::uniform_int_distribution<size_t>(1, static_cast<size_t>(b.seq) - 1)(rng);
  auto logits = [&] {  // of the batch as it is now
    return gpt_reference_run(cfg, w, b.tokens, b.targets, b.batch, b.seq, GptPass::forward_only).logits;
  };
  const std::vector<double> before = logits();
  b.tokens[t0] = (b.tokens[t0] + 1 + static_cast<int32_t>(rng() % static_cast<uint64_t>(cfg.vocab - 1))) % cfg.vocab;
  const std::vector<double> after = logits();
  const size_t Vp = static_cast<size_t>(cfg.vocab_padded), T = static_cast<size_t>(b.seq);
  for (size_t row = 0; row < 2 * T; ++row) {
    const bool may_change = row >= t0 && row < T;  // sample 0, positions t0..T-1
    bool same = true;
    for (size_t c = 0; c < Vp; ++c) same = same && before[row * Vp + c] == after[row * Vp + c];
    if (!may_change) {
      EXPECT_TRUE(same) << "row " << row << " changed when the token at position " << t0 << " did";
    }
    if (row == t0) {
      EXPECT_FALSE(same) << "position " << t0 << "'s own logits did not change with its token";
    }
  }
}

// The padded vocabulary rows of wte reach only the padded logit columns, and
// those take no part in the loss: making them huge changes those columns and
// nothing else (loss and gradients bitwise equal; the padded rows' gradient
// stays 0). With wte all zero every class logit is 0, so the loss is log V
// exactly, not log Vp.
TEST(GptReference, PaddedLogitsDoNotAffectTheLoss) {
  const uint64_t seed = test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const GptReferenceConfig cfg = tiny_config();
  GptTensors w = random_weights(cfg, rng);
  const Batch b = random_batch(cfg, rng, 2, 8);
  const GptReferenceResult plain = gpt_reference_run(cfg, w, b.tokens, b.targets, b.batch, b.seq);
  const size_t C = static_cast<size_t>(cfg.n_embd), V = static_cast<size_t>(cfg.vocab);
  const size_t Vp = static_cast<size_t>(cfg.vocab_padded);
  std::vector<double>& wte = w.at("transformer.wte.weight");
  for (size_t i = V * C; i < Vp * C; ++i) wte[i] = 50.0 * (rng() % 2 ? 1.0 : -1.0);
  const GptReferenceResult huge = gpt_reference_run(cfg, w, b.tokens, b.targets, b.batch, b.seq);
  EXPECT_EQ(huge.loss, plain.loss);
  size_t padded_changed = 0;
  for (size_t row = 0; row < static_cast<size_t>(b.batch * b.seq); ++row)
    for (size_t c = V; c < Vp; ++c) padded_changed += huge.logits[row * Vp + c] != plain.logits[row * Vp + c];
  EXPECT_EQ(padded_changed, static_cast<size_t>(b.batch * b.seq) * (Vp - V)) << "the padded columns did not move";
  for (const auto& [name, grad] : plain.grads) EXPECT_EQ(huge.grads.at(name), grad) << name;
  const std::vector<double>& dwte = huge.grads.at("transformer.wte.weight");
  for (size_t i = V * C; i < Vp * C; ++i) ASSERT_EQ(dwte[i], 0.0) << "padded wte element " << i;

  std::fill(wte.begin(), wte.end(), 0.0);
  EXPECT_DOUBLE_EQ(loss_of(cfg, w, b), std::log(static_cast<double>(V)));
}

TEST(GptReference, RefusesBadInputNamingIt) {
  std::mt19937_64 rng(test_seed());
  const GptReferenceConfig cfg = tiny_config();
  GptTensors w = random_weights(cfg, rng);
  Batch b = random_batch(cfg, rng, 1, 4);
  auto message = [&](const GptTensors& weights, const Batch& batch, const GptReferenceConfig& c) -> std::string {
    try {
      gpt_reference_run(c, weights, batch.tokens, batch.targets, batch.batch, batch.seq);
    } catch (const ddp::Error& e) {
      return e.what();
    }
    return "";
  };
  GptTensors missing = w;
  missing.erase("transformer.h.1.mlp.c_fc.bias");
  missing["lm_head.weight"] = w.at("transformer.wte.weight");
  EXPECT_NE(message(missing, b, cfg).find("transformer.h.1.mlp.c_fc.bias"), std::string::npos);
  Batch high = b;
  high.tokens[2] = cfg.vocab;  // a padded row: not a real token
  EXPECT_NE(message(w, high, cfg).find("position 2"), std::string::npos);
  Batch longer = random_batch(cfg, rng, 1, cfg.block_size + 1);
  EXPECT_NE(message(w, longer, cfg).find("block_size"), std::string::npos);
  GptReferenceConfig odd = cfg;
  odd.n_head = 3;
  EXPECT_NE(message(w, b, odd).find("n_head 3"), std::string::npos);
}

}  // namespace
}  // namespace ddp::test
