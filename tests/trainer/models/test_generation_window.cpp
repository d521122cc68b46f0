// test_generation_window.cpp: what --generate relies on (generation.cpp):
// the GPT reads whole windows of block_size tokens, so a shorter context is
// padded on the right, and the logits at its last real position must be
// exactly (bitwise) those of any other padding: the causal mask gives
// every position zero weight on the ones after it. Fresh random weights
// (wide, so attention is far from uniform) and tokens on each run.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kernels/buffer.h"
#include "kernels/cpu/cpu_backend.h"
#include "support/test_support.h"
#include "trainer/models/gpt/gpt_model.h"

namespace ddp {
namespace {

TEST(GenerationWindow, LogitsUpToTheLastRealPositionIgnoreTheRightPadding) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  GptConfig g;
  g.n_layer = 2;
  g.n_head = 2;
  g.n_embd = 32;
  g.block_size = 16;
  g.vocab_size = 64;
  g.real_vocab = 64;
  CpuBackend cpu(1);
  GptModel model(cpu, g, 1);
  std::normal_distribution<float> normal(0.0f, 0.15f);
  std::vector<lowp16> weights(model.parameters().flat_count());
  for (lowp16& w : weights) w = to_half(normal(rng));
  Buffer<lowp16> w_dev(cpu, weights.size());
  w_dev.upload(weights);
  const int t = g.block_size, vocab = g.vocab_size;
  for (int n = 1; n < t; n += 1 + static_cast<int>(rng() % 4)) {
    std::vector<int32_t> a(t), b(t);
    for (int i = 0; i < t; ++i) a[i] = b[i] = static_cast<int32_t>(rng() % vocab);
    for (int i = n; i < t; ++i)  // another padding after position n-1, each token changed
      b[i] = static_cast<int32_t>((a[i] + 1 + rng() % (vocab - 1)) % vocab);
    std::vector<lowp16> la(static_cast<size_t>(t) * vocab), lb(la.size());
    for (auto [tokens, logits] : {std::make_pair(&a, &la), std::make_pair(&b, &lb)}) {
      Buffer<int32_t> ids(cpu, t);
      ids.upload(*tokens);
      DeviceBatch batch;
      batch.token_ids = ids.data();
      batch.rows = 1;
      batch.labels_per_row = t;
      const ModelOutput out = model.forward(batch, WeightTable::flat(w_dev.data(), model.parameters()));
      cpu.copy_to_host(logits->data(), out.values, logits->size() * sizeof(lowp16));
    }
    for (int i = 0; i < n * vocab; ++i)
      ASSERT_EQ(la[i].bits, lb[i].bits) << "context " << n << ", position " << i / vocab << ", class " << i % vocab;
    // The padding is read where it is visible: position n's logits change (the test could fail).
    bool differs = false;
    for (int j = 0; j < vocab; ++j)
      differs |= la[static_cast<size_t>(n) * vocab + j].bits != lb[static_cast<size_t>(n) * vocab + j].bits;
    EXPECT_TRUE(differs) << "context " << n;
  }
}

}  // namespace
}  // namespace ddp
