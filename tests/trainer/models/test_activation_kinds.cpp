// test_activation_kinds.cpp: a model's activation bytes by kind
// (activation_bytes.h) are what its construction adds to the allocation
// tally, each kind's formula (written out again here) equals its allocated
// bytes, and the banner line and the metrics fields (activation_report.h)
// carry both.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/error.h"
#include "support/test_support.h"
#include "trainer/models/gpt/gpt_model.h"
#include "trainer/models/mlp/mlp_model.h"
#include "trainer/report/activation_report.h"

namespace ddp {
namespace {

const ActivationKind& kind_named(const ActivationKinds& kinds, const std::string& name) {
  for (const ActivationKind& k : kinds)
    if (k.name == name) return k;
  throw Error("no activation kind " + name);
}

TEST(ActivationKinds, MlpKindsAreItsAllocationsAndTheirFormulas) {
  std::mt19937_64 rng(test::test_seed());
  for (int trial = 0; trial < 8; ++trial) {
    MlpConfig config;
    config.layer_widths = {1 + static_cast<int64_t>(rng() % 40)};
    const int hidden_layers = static_cast<int>(rng() % 4);
    int64_t hidden_sum = 0;
    for (int i = 0; i < hidden_layers; ++i) {
      config.layer_widths.push_back(1 + static_cast<int64_t>(rng() % 70));
      hidden_sum += config.layer_widths.back();
    }
    const int64_t out = 1 + static_cast<int64_t>(rng() % 12);
    config.layer_widths.push_back(out);
    const bool gelu = rng() % 2 == 0;
    config.activation = gelu ? Activation::Gelu : Activation::Relu;
    const int batch = 1 + static_cast<int>(rng() % 33);

    CpuBackend backend(1);
    const size_t before = backend.allocations().in_use_bytes;
    MlpModel model(backend, config, batch);
    const ActivationKinds kinds = model.activation_kinds();
    SCOPED_TRACE("widths " + std::to_string(config.layer_widths.size()) + " batch " + std::to_string(batch));
    EXPECT_EQ(activation_bytes_total(kinds), backend.allocations().in_use_bytes - before);
    const double hidden = static_cast<double>(hidden_sum);
    EXPECT_EQ(kind_named(kinds, "layers").formula_bytes, 2.0 * batch * (hidden + out + (gelu ? hidden : 0)));
    EXPECT_EQ(kind_named(kinds, "gradients").formula_bytes, 2.0 * batch * (hidden + out));
    for (const ActivationKind& k : kinds) EXPECT_EQ(static_cast<double>(k.bytes), k.formula_bytes) << k.name;
  }
}

TEST(ActivationKinds, GptKindsAreItsAllocationsAndTheirFormulasAtEveryLevel) {
  std::mt19937_64 rng(test::test_seed());
  for (const Recompute level : {Recompute::None, Recompute::Light, Recompute::Block})
    for (const int chunk : {0, 100}) {
      GptConfig g;
      g.attention = rng() % 2 ? AttentionPath::Fused : AttentionPath::Explicit;
      g.n_layer = 1 + static_cast<int>(rng() % 3);
      g.n_head = 1 + static_cast<int>(rng() % 3);
      g.n_embd = g.n_head * (8 + 8 * static_cast<int>(rng() % 3));
      g.block_size = 8 + static_cast<int>(rng() % 40);
      g.vocab_size = 64 * (1 + static_cast<int>(rng() % 8));
      g.real_vocab = g.vocab_size - static_cast<int>(rng() % 10);
      g.recompute = level;
      g.classifier_chunk = chunk;
      const int batch = 1 + static_cast<int>(rng() % 4);
      SCOPED_TRACE(std::string(recompute_name(level)) + ", " + attention_path_name(g.attention) + ", chunk " + std::to_string(chunk) + ", L " + std::to_string(g.n_layer) +
                   " nh " + std::to_string(g.n_head) + " C " + std::to_string(g.n_embd) + " T " +
                   std::to_string(g.block_size) + " V " + std::to_string(g.vocab_size) + " B " +
                   std::to_string(batch));
      CpuBackend backend(1);
      const size_t before = backend.allocations().in_use_bytes;
      GptModel model(backend, g, batch);
      const ActivationKinds kinds = model.activation_kinds();
      ASSERT_EQ(kinds.size(), 5u);
      EXPECT_EQ(activation_bytes_total(kinds), backend.allocations().in_use_bytes - before);
      for (const ActivationKind& k : kinds) EXPECT_EQ(static_cast<double>(k.bytes), k.formula_bytes) << k.name;
      // The classifier's, written out: two FP16 [R, V] unchunked; one and the rows' FP32 losses chunked.
      const double r = static_cast<double>(batch) * g.block_size;
      EXPECT_EQ(kind_named(kinds, "classifier").formula_bytes,
                chunk > 0 ? 2 * r * g.vocab_size + 4 * r : 4 * r * g.vocab_size);
    }
}

TEST(ActivationKinds, LineAndFieldsCarryEachKindsBytesAndFormula) {
  std::mt19937_64 rng(test::test_seed());
  const size_t a = 1 + rng() % (1u << 30), b = 1 + rng() % (1u << 20);
  const ActivationKinds kinds = {{"attention", a, static_cast<double>(a) + 3, "L(2RC)"}, {"mlp", b, 5.0, "8LRC"}};
  const std::string line = activation_line(kinds);
  EXPECT_NE(line.find("attention "), std::string::npos) << line;
  EXPECT_NE(line.find("= L(2RC)]"), std::string::npos) << line;
  EXPECT_NE(line.find("mlp "), std::string::npos) << line;
  EXPECT_EQ(activation_line({}), "");
  JsonRecord r;
  add_activation_fields(r, kinds);
  const std::string json = r.str();
  EXPECT_NE(json.find("\"activation_attention_bytes\":" + std::to_string(a)), std::string::npos) << json;
  EXPECT_NE(json.find("\"activation_mlp_formula\":\"8LRC\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"activation_bytes\":" + std::to_string(a + b)), std::string::npos) << json;
  JsonRecord none;
  add_activation_fields(none, {});
  EXPECT_EQ(none.str().find("activation"), std::string::npos) << none.str();
}

}  // namespace
}  // namespace ddp
