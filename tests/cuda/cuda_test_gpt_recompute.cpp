// cuda_test_gpt_recompute.cpp: --recompute on a real GPU. The GPT on
// CudaBackend at light and block against none: over two accumulated
// micro-batches the same loss, gradient and logit bits (cuBLASLt's c_fc
// with its GELU epilogue, run again, gives the forward's bits); and whole
// training runs (AdamW, grad-accum 2, eager and under --cuda-graph) end with
// none's master weights and test loss (the graphs where NCCL can be
// captured). Skips where no GPU is visible.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nccl.h>

#include "comm/nccl_communicator.h"
#include "kernels/buffer.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/half.h"
#include "support/gpu_test.h"
#include "support/temp_dir.h"
#include "support/test_support.h"
#include "trainer/data/data_source.h"
#include "trainer/loop/trainer.h"
#include "trainer/models/gpt/gpt_model.h"
#include "trainer/models/loss_head.h"

namespace ddp {
namespace {

constexpr int kBatch = 4;

GptConfig small_gpt(Recompute level) {
  GptConfig g;
  g.n_layer = 3;
  g.n_head = 4;
  g.n_embd = 64;
  g.block_size = 32;
  g.vocab_size = 256;
  g.real_vocab = 250;
  g.recompute = level;
  return g;
}

struct Outcome {
  std::vector<float> losses;
  std::vector<half16> grads;
  std::vector<half16> logits;
};

Outcome run_model(const GptConfig& g, uint64_t seed) {
  CudaBackend gpu(0);
  GptModel model(gpu, g, kBatch);
  const ParameterRegistry& reg = model.parameters();
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.15f);
  std::vector<half16> host_weights(reg.flat_count(), to_half(0.0f));
  for (const ParameterTensor& t : reg.tensors()) {
    const bool gain = t.name.find("ln_") != std::string::npos && t.name.find(".weight") != std::string::npos;
    for (size_t i = 0; i < t.count; ++i) host_weights[t.offset + i] = to_half((gain ? 1.0f : 0.0f) + normal(rng));
  }
  Buffer<half16> w(gpu, reg.flat_count()), grads(gpu, reg.flat_count());
  w.upload(host_weights);
  grads.upload(test::poison_halves(reg.flat_count()));
  const WeightTable weights = WeightTable::flat(w.data(), reg);
  const size_t rows = static_cast<size_t>(kBatch) * g.block_size;
  Buffer<int32_t> tokens(gpu, rows), labels(gpu, rows);
  Buffer<float> loss(gpu, 1);
  Outcome o;
  for (int m = 0; m < 2; ++m) {
    tokens.upload(test::random_labels(rng, rows, g.real_vocab));
    labels.upload(test::random_labels(rng, rows, g.real_vocab));
    DeviceBatch batch;
    batch.token_ids = tokens.data();
    batch.labels = labels.data();
    batch.rows = kBatch;
    batch.labels_per_row = g.block_size;
    const ModelOutput out = model.forward(batch, weights);
    loss_forward(gpu, LossKind::SoftmaxCrossEntropy, out, batch, loss.data(), nullptr);
    loss_backward(gpu, LossKind::SoftmaxCrossEntropy, out, batch, ScalarArg(512.0f), model.output_grad());
    o.losses.push_back(loss.download()[0]);
    model.backward(weights, GradTable::flat(grads.data(), reg), /*accumulate=*/m > 0, GradientsReady());
  }
  o.grads = grads.download();
  DeviceBatch eval;
  eval.token_ids = tokens.data();
  eval.rows = kBatch;
  const ModelOutput out = model.forward(eval, weights);
  o.logits.resize(static_cast<size_t>(out.rows) * out.width);
  gpu.copy_to_host(o.logits.data(), out.values, o.logits.size() * sizeof(half16));
  return o;
}

bool same_halves(const std::vector<half16>& a, const std::vector<half16>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(half16)) == 0;
}

class CudaGptRecompute : public test::GpuTest {};

TEST_F(CudaGptRecompute, GradientsAreTheKeptActivationsBits) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (set DDP_TEST_SEED to reproduce)");
  const Outcome want = run_model(small_gpt(Recompute::None), seed);
  for (const float l : want.losses) ASSERT_TRUE(std::isfinite(l));
  for (const Recompute level : {Recompute::Light, Recompute::Block}) {
    SCOPED_TRACE(std::string("--recompute ") + recompute_name(level));
    const Outcome got = run_model(small_gpt(level), seed);
    ASSERT_EQ(got.losses.size(), want.losses.size());
    for (size_t m = 0; m < got.losses.size(); ++m)
      EXPECT_EQ(test::bits_of(got.losses[m]), test::bits_of(want.losses[m])) << "micro-batch " << m;
    EXPECT_TRUE(same_halves(got.grads, want.grads)) << "a gradient differs from --recompute none's";
    EXPECT_TRUE(same_halves(got.logits, want.logits)) << "the evaluation logits differ";
  }
}

struct GpuRun {
  TrainSummary summary;
  std::vector<float> master;
};

// A backend and communicator of its own per run, destroyed in main's order.
GpuRun train_on_gpu(const TrainConfig& c) {
  CudaBackend gpu(0);
  NcclCommunicator comm(0, 1, gpu.compute_stream());
  Trainer trainer(c, gpu, comm, load_train_test(c.data, c.seed));
  trainer.prepare();
  GpuRun r;
  r.summary = trainer.run();
  r.master = trainer.snapshot().master_weights_fp32;
  return r;
}

TEST_F(CudaGptRecompute, TrainingRunsGiveTheSameBits) {
  const test::TempDir temp_dir("cuda_gpt_recompute");
  std::mt19937_64 rng(test::test_seed());
  std::string text;
  while (text.size() < 20000) text += static_cast<char>('a' + rng() % 20);
  const std::string path = temp_dir.path() + "/text.txt";
  std::ofstream(path, std::ios::binary) << text;
  TrainConfig c;
  c.device = "cuda";
  c.model = "gpt";
  c.gpt = small_gpt(Recompute::None);
  c.data.kind = "text";
  c.data.train_text = path;
  c.data.block_size = 32;
  c.data.vocab_size = 256;
  c.data.val_fraction = 0.1;
  c.loss = LossKind::SoftmaxCrossEntropy;
  c.loss_name = "xent";
  c.optimizer = OptimizerKind::AdamW;
  c.lr = 3e-3;
  c.batch_size = 8;
  c.steps = 6;
  c.log_every = 1000000;
  c.lr_schedule = LrScheduleKind::Constant;
  int nccl_version = 0;
  ASSERT_EQ(ncclGetVersion(&nccl_version), ncclSuccess);
  for (const bool graphs : {false, true}) {
    SCOPED_TRACE(graphs ? "--cuda-graph" : "eager");
    if (graphs && !nccl_version_supports_capture(nccl_version)) {
      std::printf("--cuda-graph not compared: %s\n", nccl_capture_unsupported_reason(nccl_version).c_str());
      continue;
    }
    c.cuda_graph = graphs;
    c.grad_accum = graphs ? 1 : 2;  // a captured step is one micro-batch
    c.gpt.recompute = Recompute::None;
    const GpuRun want = train_on_gpu(c);
    for (const Recompute level : {Recompute::Light, Recompute::Block}) {
      SCOPED_TRACE(std::string("--recompute ") + recompute_name(level));
      c.gpt.recompute = level;
      const GpuRun got = train_on_gpu(c);
      EXPECT_EQ(got.summary.test_loss, want.summary.test_loss);
      ASSERT_EQ(got.master.size(), want.master.size());
      size_t differ = 0;
      for (size_t i = 0; i < want.master.size(); ++i)
        differ += test::bits_of(got.master[i]) != test::bits_of(want.master[i]);
      EXPECT_EQ(differ, 0u) << "of " << want.master.size() << " master weights";
    }
  }
}

}  // namespace
}  // namespace ddp
