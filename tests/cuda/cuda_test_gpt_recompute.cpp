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
#include "kernels/lowp_codec.h"
#include "support/gpt_micro_batches.h"
#include "support/gpu_test.h"
#include "support/lowp_format.h"
#include "support/precision_config.h"
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

using test::same_halves;
using Outcome = test::GptStepOutcome;

Outcome run_model(const GptConfig& g, uint64_t seed, Precision precision) {
  CudaBackend gpu(0, precision);
  GptModel model(gpu, g, kBatch);
  std::mt19937_64 rng(seed);
  const test::GptStepInputs in = test::draw_gpt_step_inputs(
      rng, model.parameters(), static_cast<size_t>(kBatch) * g.block_size, g.real_vocab, precision);
  return test::run_gpt_micro_batches(gpu, model, kBatch, g.block_size, in);
}

// Run as Precisions/CudaGptRecompute.<test>/fp16 and .../bf16.
class CudaGptRecompute : public test::GpuTest, public ::testing::WithParamInterface<Precision> {};

TEST_P(CudaGptRecompute, GradientsAreTheKeptActivationsBits) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (set DDP_TEST_SEED to reproduce)");
  const Outcome want = run_model(small_gpt(Recompute::None), seed, GetParam());
  for (const float l : want.losses) ASSERT_TRUE(std::isfinite(l));
  for (const Recompute level : {Recompute::Light, Recompute::Block}) {
    SCOPED_TRACE(std::string("--recompute ") + recompute_name(level));
    const Outcome got = run_model(small_gpt(level), seed, GetParam());
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
  CudaBackend gpu(0, c.precision);
  NcclCommunicator comm(0, 1, gpu.compute_stream(), 0, c.precision);
  Trainer trainer(c, gpu, comm, load_train_test(c.data, c.seed));
  trainer.prepare();
  GpuRun r;
  r.summary = trainer.run();
  r.master = trainer.snapshot().master_weights_fp32;
  return r;
}

TEST_P(CudaGptRecompute, TrainingRunsGiveTheSameBits) {
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
  c = test::in_precision(c, GetParam());
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

INSTANTIATE_TEST_SUITE_P(Precisions, CudaGptRecompute, ::testing::ValuesIn(test::kBothPrecisions),
                         test::precision_test_name);

}  // namespace
}  // namespace ddp
