// test_mlp_model.cpp: the MLP behind the Model interface: its tensors carry
// nn.Sequential's state_dict names in backward's order, it draws the same
// initial weights as before tensors had names (PyTorch nn.Linear's bounds,
// layer 0 first, weight then bias), backward reports every tensor ready
// once, in registry order, right after the GEMM that wrote it, and the
// layer hooks run before each layer's forward and backward.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "kernels/cpu/cpu_backend.h"
#include "support/test_support.h"
#include "kernels/error.h"
#include "trainer/data/data_source.h"
#include "trainer/models/mlp/mlp_model.h"
#include "trainer/config/model_catalog.h"
#include "trainer/params/parameter_store.h"

namespace ddp {
namespace {

TEST(MlpModel, TensorsAreNamedAsNnSequentialLastLayerFirstAndAligned) {
  const ParameterRegistry r = mlp_parameters({784, 512, 256, 10});
  ASSERT_EQ(r.size(), 6u);
  const char* names[] = {"4.weight", "4.bias", "2.weight", "2.bias", "0.weight", "0.bias"};
  const char* stems[] = {"layer2.weight", "layer2.bias",   "layer1.weight",
                         "layer1.bias",   "layer0.weight", "layer0.bias"};
  const std::vector<int64_t> shapes[] = {{10, 256}, {10}, {256, 512}, {256}, {512, 784}, {512}};
  for (size_t i = 0; i < r.size(); ++i) {
    EXPECT_EQ(r[i].name, names[i]);
    EXPECT_EQ(r[i].file_stem, stems[i]);
    EXPECT_EQ(r[i].shape, shapes[i]);
    EXPECT_EQ(r[i].offset % 8, 0u) << r[i].name;
    // AdamW decays weights, not biases; SGD ignores the flag (one torch.optim.SGD group: every tensor decays).
    EXPECT_EQ(r[i].weight_decay, i % 2 == 0) << r[i].name;
  }
  EXPECT_EQ(r.parameter_count(), 784u * 512 + 512 + 512 * 256 + 256 + 256 * 10 + 10);
}

// The initialisation before tensors had names, written out independently:
// one stream, layer 0 first, its weight then its bias, each uniform in
// +-1/sqrt(in) from 24 random bits; laid out last layer first, no padding.
std::vector<float> unnamed_mlp_init(const std::vector<int64_t>& widths, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const size_t n = widths.size() - 1;
  std::vector<std::vector<float>> per_layer(n);
  for (size_t i = 0; i < n; ++i) {
    const float bound = 1.0f / std::sqrt(static_cast<float>(widths[i]));
    for (int64_t j = 0; j < widths[i] * widths[i + 1] + widths[i + 1]; ++j) {
      const float u = static_cast<float>(rng() >> 40) * (1.0f / 16777216.0f);
      per_layer[i].push_back((2.0f * u - 1.0f) * bound);
    }
  }
  std::vector<float> flat;
  for (size_t i = n; i-- > 0;) flat.insert(flat.end(), per_layer[i].begin(), per_layer[i].end());
  return flat;
}

TEST(MlpModel, InitialWeightsAreTheSameAsBeforeTensorsHadNames) {
  const std::vector<int64_t> widths = {13, 7, 5, 3};  // odd sizes: every tensor after the first is padded
  const ParameterRegistry r = mlp_parameters(widths);
  ASSERT_GT(r.flat_count(), r.parameter_count());
  const uint64_t seed = test::test_seed();
  EXPECT_EQ(r.pack(r.initial_values(seed)), unnamed_mlp_init(widths, seed));
}

TEST(MlpModel, BackwardReportsEachTensorOnceInOrderRightAfterItsGemmAndHooksRunPerLayer) {
  std::mt19937_64 rng(test::test_seed());
  MlpConfig mlp;
  mlp.layer_widths = {9, 12, 11, 4};
  const int rows = 5;
  CpuBackend cpu(1);
  MlpModel model(cpu, mlp, rows);
  const ParameterRegistry& r = model.parameters();
  ParameterStore params(cpu, r);
  params.set_master_weights(r.initial_values(rng()));
  Buffer<lowp16> x(cpu, rows * 9);
  x.upload(test::random_halves(rng, rows * 9));
  std::string log;
  model.set_layer_hooks({[&](int layer) { log += "F" + std::to_string(layer) + " "; },
                         [&](int layer) { log += "B" + std::to_string(layer) + " "; }});
  DeviceBatch batch;
  batch.features_lowp = x.data();
  batch.rows = rows;
  model.forward(batch, WeightTable::flat(params.weights_lowp.data(), r));
  EXPECT_EQ(log, "F0 F1 F2 ");
  log.clear();
  cpu.copy_to_device(model.output_grad(), test::random_halves(rng, rows * 4).data(), rows * 4 * sizeof(lowp16));
  params.grads_lowp.upload(test::poison_halves(r.flat_count()));
  size_t next = 0;
  const GradTable grads_lowp = GradTable::flat(params.grads_lowp.data(), r);
  model.backward(WeightTable::flat(params.weights_lowp.data(), r), grads_lowp, false, [&](size_t first, size_t end) {
    EXPECT_EQ(first, next);  // in registry order, nothing skipped or repeated
    EXPECT_GT(end, first);
    // Ready means written: no poison left in these tensors.
    const std::vector<lowp16> g = params.grads_lowp.download();
    for (size_t t = first; t < end; ++t)
      for (size_t j = 0; j < r[t].count; ++j)
        ASSERT_TRUE(std::isfinite(half_to_float(g[r[t].offset + j]))) << r[t].name << " " << j;
    // ...and the tensors after them are not yet (the next layer's GEMMs come later).
    if (end < r.size()) {
      EXPECT_FALSE(std::isfinite(half_to_float(g[r[end].offset]))) << r[end].name;
    }
    log += "R" + std::to_string(first) + "-" + std::to_string(end) + " ";
    next = end;
  });
  EXPECT_EQ(next, r.size());
  EXPECT_EQ(log, "B2 R0-2 B1 R2-4 B0 R4-6 ");
}

TEST(MlpModel, TokenDataIsRefusedWithOneLine) {
  TrainConfig c;
  c.mlp.layer_widths = {4, 8};
  TrainTestData data;
  for (Dataset* d : {&data.train, &data.test}) {
    d->count = 2;
    d->tokens_per_sample = 4;
    d->vocab_size = 8;
    d->num_classes = 8;
    d->token_ids.assign(8, 1);
    d->labels.assign(8, 2);
    d->source = "tokens.bin";
  }
  try {
    check_model_matches_data(c, data);
    ADD_FAILURE() << "token data accepted by the MLP";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token ids"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ddp
