// test_gpt_chunked_classifier.cpp: the GPT with its chunked classifier
// (--classifier-chunk, tied_classifier.h) against the unchunked head on the
// CPU, in FP16 and in BF16: the same loss bits and gradient bits over two
// accumulated micro-batches, at chunks that divide the rows, that do not,
// and that exceed them, on 1 and 2 threads; the evaluation logits the same;
// whole training runs with the unchunked master weights and test loss. In
// FP16 only, as both formats hold 2-byte words and no buffer's size depends
// on which: the allocation tally's peak lower by classifier_bytes' predicted
// amount.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/buffer.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/half.h"
#include "support/recording_backend.h"
#include "support/gpt_micro_batches.h"
#include "support/lowp_format.h"
#include "support/precision_config.h"
#include "support/temp_dir.h"
#include "support/test_support.h"
#include "support/training_run_support.h"
#include "trainer/models/gpt/gpt_model.h"
#include "trainer/models/loss_head.h"

namespace ddp {
namespace {

constexpr int kBatch = 4;

GptConfig tiny_gpt(int chunk) {
  GptConfig g;
  g.n_layer = 2;
  g.n_head = 2;
  g.n_embd = 48;
  g.block_size = 64;
  g.vocab_size = 1024;  // wide against C, so the head's buffers dominate the GEMM scratch
  g.real_vocab = 1000;
  g.classifier_chunk = chunk;
  g.attention = AttentionPath::Fused;  // named, not auto (explicit): these runs cover the fused path
  return g;
}

using test::same_halves;
using Inputs = test::GptStepInputs;

Inputs draw_inputs(std::mt19937_64& rng, const ParameterRegistry& reg, int real_vocab,
                   Precision precision = Precision::Fp16) {
  const size_t rows = static_cast<size_t>(kBatch) * tiny_gpt(0).block_size;
  return test::draw_gpt_step_inputs(rng, reg, rows, real_vocab, precision);
}

struct Outcome : test::GptStepOutcome {
  size_t peak_bytes = 0;
};

// Two micro-batches (the second accumulating), fused or through the loss
// head, then an evaluation forward.
Outcome train(CpuBackend& cpu, const GptConfig& g, const Inputs& in) {
  GptModel model(cpu, g, kBatch);
  Outcome o;
  static_cast<test::GptStepOutcome&>(o) = test::run_gpt_micro_batches(cpu, model, kBatch, g.block_size, in);
  o.peak_bytes = cpu.allocations().peak_bytes;
  return o;
}

// The numerics suites run for FP16 and for BF16 (Precisions/.../fp16, bf16).
class GptChunkedClassifier : public ::testing::TestWithParam<Precision> {};

TEST_P(GptChunkedClassifier, TrainsWithTheUnchunkedBits) {
  const Precision p = GetParam();
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  CpuBackend reg_cpu(1, p);
  const Inputs in = draw_inputs(rng, GptModel(reg_cpu, tiny_gpt(0), kBatch).parameters(), tiny_gpt(0).real_vocab, p);
  for (int threads : {1, 2}) {
    CpuBackend base_cpu(threads, p);
    const Outcome want = train(base_cpu, tiny_gpt(0), in);
    for (const float l : want.losses) ASSERT_TRUE(std::isfinite(l));
    // rows = 256, cut (tied_classifier.cpp) into 96 + 160 (chunk 16), 144 + 112
    // (100), one piece (150: its last 64 rows join it), and more than the rows.
    for (int chunk : {16, 100, 150, 500}) {
      SCOPED_TRACE(std::to_string(threads) + " threads, chunk " + std::to_string(chunk));
      CpuBackend cpu(threads, p);
      const Outcome got = train(cpu, tiny_gpt(chunk), in);
      ASSERT_EQ(got.losses.size(), want.losses.size());
      for (size_t m = 0; m < got.losses.size(); ++m)
        EXPECT_EQ(test::bits_of(got.losses[m]), test::bits_of(want.losses[m]))
            << "micro-batch " << m << ": " << got.losses[m] << " vs " << want.losses[m];
      EXPECT_TRUE(same_halves(got.grads, want.grads)) << "a gradient differs from the unchunked head's";
      EXPECT_TRUE(same_halves(got.logits, want.logits)) << "the evaluation logits differ";
    }
  }
}

TEST(GptChunkedClassifier, PeakMemoryFallsByThePredictedAmount) {
  std::mt19937_64 rng(test::test_seed());
  CpuBackend reg_cpu(1);
  const Inputs in = draw_inputs(rng, GptModel(reg_cpu, tiny_gpt(0), kBatch).parameters(), tiny_gpt(0).real_vocab);
  const size_t rows = static_cast<size_t>(kBatch) * tiny_gpt(0).block_size;
  CpuBackend unchunked_cpu(2);
  const size_t unchunked_peak = train(unchunked_cpu, tiny_gpt(0), in).peak_bytes;
  for (int chunk : {16, 100}) {  // pieces of 96 + 160 and of 144 + 112 rows
    SCOPED_TRACE("chunk " + std::to_string(chunk));
    CpuBackend cpu(2);
    const size_t chunked_peak = train(cpu, tiny_gpt(chunk), in).peak_bytes;
    const double predicted =
        classifier_bytes(rows, 1024, 48, 0, true).total() - classifier_bytes(rows, 1024, 48, chunk, true).total();
    EXPECT_GT(predicted, 0.0);
    EXPECT_EQ(static_cast<double>(unchunked_peak) - static_cast<double>(chunked_peak), predicted)
        << "peaks " << unchunked_peak << " and " << chunked_peak;
  }
}

// Through the trainer (the train step's fused path), eager and as an
// emulated CUDA graph: the run's master weights and test loss are the
// unchunked run's bits.
TEST_P(GptChunkedClassifier, TrainingRunsGiveTheUnchunkedBits) {
  const Precision p = GetParam();
  const test::TempDir temp_dir("gpt_chunked");
  std::mt19937_64 rng(test::test_seed());
  const std::string path = temp_dir.path() + "/text.txt";
  test::write_random_letters(path, rng, 12000, 20);
  TrainConfig c = test::in_precision(test::gpt_text_run(tiny_gpt(0), path, 64, 1024, 6), p);
  CpuBackend cpu(2, p);
  const test::TrainingRun want = test::train_with(cpu, c);
  c.gpt.classifier_chunk = 100;  // 256 rows: pieces of 144 and 112
  for (const bool graphs : {false, true}) {
    SCOPED_TRACE(graphs ? "emulated CUDA graphs" : "eager");
    c.cuda_graph = graphs;
    c.grad_accum = graphs ? 1 : 2;  // a captured step is one micro-batch
    CpuBackend eager_cpu(2, p);
    RecordingBackend recording(DeviceKind::Cuda, /*can_capture=*/true, p);
    Backend& backend = graphs ? static_cast<Backend&>(recording) : eager_cpu;
    const test::TrainingRun got = test::train_with(backend, c);
    if (graphs) {
      c.gpt.classifier_chunk = 0;
      RecordingBackend unchunked(DeviceKind::Cuda, /*can_capture=*/true, p);
      const test::TrainingRun base = test::train_with(unchunked, c);
      EXPECT_GT(recording.replays, 0) << "no step was replayed";
      EXPECT_EQ(got.summary.test_loss, base.summary.test_loss);
      EXPECT_EQ(got.master, base.master);
      continue;
    }
    EXPECT_EQ(got.summary.test_loss, want.summary.test_loss)
        << got.summary.test_loss << " vs " << want.summary.test_loss;
    ASSERT_EQ(got.master.size(), want.master.size());
    size_t differ = 0;
    for (size_t i = 0; i < want.master.size(); ++i)
      differ += test::bits_of(got.master[i]) != test::bits_of(want.master[i]);
    EXPECT_EQ(differ, 0u) << "of " << want.master.size() << " master weights";
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, GptChunkedClassifier, ::testing::ValuesIn(test::kBothPrecisions),
                         test::precision_test_name);

}  // namespace
}  // namespace ddp
