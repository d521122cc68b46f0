// test_gpt_dropped_logits.cpp: the GPT's chunked head with its logits
// dropped (--classifier-logits drop, tied_classifier.h) against the same
// head keeping them, on the CPU, in FP16 and in BF16:
//   - the head alone: the loss and dx are keep's bits; d_wte, keep's and
//     drop's alike, is within one rounding to the format plus FP32's
//     summation bound of a double reference from the same 16-bit gradient
//     and x;
//   - the whole model over two accumulated micro-batches on 1 and 2
//     threads: the losses and every gradient but wte's are keep's bits, and
//     the evaluation outputs handed out by rows (forward_rows) are keep's
//     logits;
//   - through the trainer, eager and as emulated CUDA graphs: the run ends
//     within 0.1% of keep's test loss, and graphs give eager's bits;
// and in FP16 only, as both formats hold 2-byte words and no buffer's size
// depends on which:
//   - the training peak falls by classifier_bytes' predicted amount, and
//     the activation kinds' classifier entry equals its formula.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "kernels/buffer.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/half.h"
#include "support/gpt_micro_batches.h"
#include "support/lowp_format.h"
#include "support/precision_config.h"
#include "support/recording_backend.h"
#include "support/temp_dir.h"
#include "support/test_support.h"
#include "support/training_run_support.h"
#include "trainer/models/gpt/gpt_model.h"
#include "trainer/models/layers/tied_classifier.h"

namespace ddp {
namespace {

constexpr int kBatch = 4;

GptConfig tiny_gpt(int chunk, ClassifierLogits logits, int context = 64) {
  GptConfig g;
  g.n_layer = 2;
  g.n_head = 2;
  g.n_embd = 48;
  g.block_size = context;
  g.vocab_size = 1024;
  g.real_vocab = 1000;
  g.classifier_chunk = chunk;
  g.classifier_logits = logits;
  g.attention = AttentionPath::Explicit;
  return g;
}

// ---- the head alone ---------------------------------------------------------------

struct HeadRun {
  float loss = 0;
  std::vector<lowp16> dx, d_wte, dlogits;  // dlogits: keep's only
};

// One forward_with_loss and backward of a TiedClassifier over x [rows, C],
// wte [V, C] the only tensor of its registry.
HeadRun run_head(CpuBackend& cpu, ClassifierLogits logits, int chunk, const std::vector<lowp16>& x,
                 const std::vector<lowp16>& wte, const std::vector<int32_t>& labels, int rows, int vocab, int c) {
  ParameterRegistry reg;
  ParameterTensor t;
  t.name = "wte";
  t.shape = {vocab, c};
  reg.add(t);
  Buffer<lowp16> w(cpu, reg.flat_count()), grads(cpu, reg.flat_count()), dx(cpu, x.size()), dx_in(cpu, x.size());
  Buffer<int32_t> dlabels(cpu, labels.size());
  Buffer<float> loss(cpu, 1);
  std::vector<lowp16> flat(reg.flat_count(), test::LowpFormat{cpu.precision()}.narrow(0.0f));
  std::copy(wte.begin(), wte.end(), flat.begin());
  w.upload(flat);
  grads.upload(test::poison_halves(reg.flat_count()));
  dx.upload(test::poison_halves(x.size()));
  dx_in.upload(x);
  dlabels.upload(labels);
  TiedClassifier head(cpu, c, vocab, vocab - 7, static_cast<size_t>(rows), chunk, logits);
  head.bind(0);
  const WeightTable weights = WeightTable::flat(w.data(), reg);
  head.forward_with_loss(dx_in.data(), rows, weights, dlabels.data(), ScalarArg(1024.0f), loss.data());
  HeadRun r;
  r.loss = loss.download()[0];
  if (logits == ClassifierLogits::Keep) {
    r.dlogits.resize(static_cast<size_t>(rows) * vocab);
    cpu.copy_to_host(r.dlogits.data(), head.output_grad(), r.dlogits.size() * sizeof(lowp16));
  }
  head.backward(dx_in.data(), rows, weights, GradTable::flat(grads.data(), reg), /*accumulate=*/false, dx.data());
  r.dx = dx.download();
  r.d_wte = grads.download();
  r.d_wte.resize(wte.size());
  return r;
}

// The numerics suites run for FP16 and for BF16 (Precisions/.../fp16, bf16).
class GptDroppedLogits : public ::testing::TestWithParam<Precision> {};

TEST_P(GptDroppedLogits, HeadGivesKeepsLossAndDxAndAnFp32SumOfDwte) {
  const test::LowpFormat fmt{GetParam()};
  const bool bf16 = fmt.precision == Precision::Bf16;
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const int rows = 400, vocab = 1000, c = 40;
  const auto x = fmt.random(rng, static_cast<size_t>(rows) * c);
  const auto wte = fmt.random(rng, static_cast<size_t>(vocab) * c);
  const auto labels = test::random_labels(rng, static_cast<size_t>(rows), vocab - 7);
  for (int threads : {1, 2})
    for (int chunk : {16, 130}) {  // pieces of 96 x 4 + 16 joined (112), and 144 + 144 + 112
      SCOPED_TRACE(std::to_string(threads) + " threads, chunk " + std::to_string(chunk));
      CpuBackend keep_cpu(threads, fmt.precision), drop_cpu(threads, fmt.precision);
      const HeadRun keep = run_head(keep_cpu, ClassifierLogits::Keep, chunk, x, wte, labels, rows, vocab, c);
      const HeadRun drop = run_head(drop_cpu, ClassifierLogits::Drop, chunk, x, wte, labels, rows, vocab, c);
      ASSERT_TRUE(std::isfinite(keep.loss));
      EXPECT_EQ(test::bits_of(drop.loss), test::bits_of(keep.loss));
      EXPECT_TRUE(test::same_halves(drop.dx, keep.dx)) << "dx differs from keep's";
      // d_wte[v, j] = sum_r dlogits[r, v] x[r, j]: each side one FP32 sum
      // (at most rows + 1 roundings of 2^-24 |term| each) rounded once to
      // the format: half an ulp (2^-11 relative for FP16's 11-bit
      // significand, 2^-8 for BF16's 8), or half the smallest subnormal
      // step (2^-25, and 2^-134 for BF16 with FP32's exponent range).
      const int half_ulp = bf16 ? -8 : -11;
      const double half_subnormal = std::ldexp(1.0, bf16 ? -134 : -25);
      // Measured, on 8 seeds: the worst element at 0.93-0.95 of this bound
      // in FP16 and 0.98-0.99 in BF16 (its rounding dominates; an exact
      // just above a power of two rounds by nearly the whole of it).
      size_t drop_differs = 0;
      for (int v = 0; v < vocab; ++v)
        for (int j = 0; j < c; ++j) {
          double exact = 0, magnitude = 0;
          for (int r = 0; r < rows; ++r) {
            const double t = static_cast<double>(fmt.widen(keep.dlogits[static_cast<size_t>(r) * vocab + v])) *
                             fmt.widen(x[static_cast<size_t>(r) * c + j]);
            exact += t;
            magnitude += std::fabs(t);
          }
          const size_t i = static_cast<size_t>(v) * c + j;
          const double sum_bound = (rows + 1) * std::ldexp(1.0, -24) * magnitude;
          const double rounding = std::max(std::ldexp(std::fabs(exact) + sum_bound, half_ulp), half_subnormal);
          ASSERT_LE(std::fabs(fmt.widen(keep.d_wte[i]) - exact), sum_bound + rounding) << "keep, element " << i;
          ASSERT_LE(std::fabs(fmt.widen(drop.d_wte[i]) - exact), sum_bound + rounding) << "drop, element " << i;
          drop_differs += drop.d_wte[i].bits != keep.d_wte[i].bits;
        }
      // Not asserted equal: the two sum in different orders. Said, so a
      // change of summation shows in the log.
      std::printf("d_wte: %zu of %d elements differ from keep's in the last bit\n", drop_differs, vocab * c);
    }
}

// ---- the model --------------------------------------------------------------------

using Inputs = test::GptStepInputs;

Inputs draw_inputs(std::mt19937_64& rng, const ParameterRegistry& reg, Precision precision) {
  const GptConfig g = tiny_gpt(0, ClassifierLogits::Keep);
  return test::draw_gpt_step_inputs(rng, reg, static_cast<size_t>(kBatch) * g.block_size, g.real_vocab, precision);
}

// The logits forward_rows hands out, put together in row order.
std::vector<lowp16> logits_by_rows(CpuBackend& cpu, GptModel& model, const Inputs& in) {
  const ParameterRegistry& reg = model.parameters();
  Buffer<lowp16> w(cpu, reg.flat_count());
  w.upload(in.weights);
  // The tokens run_gpt_micro_batches' evaluation reads: the last micro-batch's.
  Buffer<int32_t> tokens(cpu, in.tokens[1].size());
  tokens.upload(in.tokens[1]);
  DeviceBatch batch;
  batch.token_ids = tokens.data();
  batch.rows = kBatch;
  std::vector<lowp16> all;
  int expected_first = 0;
  model.forward_rows(batch, WeightTable::flat(w.data(), reg), [&](const ModelOutput& part, int first_row) {
    EXPECT_EQ(first_row, expected_first) << "blocks out of order";
    expected_first = first_row + part.rows;
    const size_t at = all.size();
    all.resize(at + static_cast<size_t>(part.rows) * part.width);
    cpu.copy_to_host(all.data() + at, part.values, static_cast<size_t>(part.rows) * part.width * sizeof(lowp16));
  });
  return all;
}

TEST_P(GptDroppedLogits, TrainsWithKeepsBitsButWte) {
  const test::LowpFormat fmt{GetParam()};
  const bool bf16 = fmt.precision == Precision::Bf16;
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  CpuBackend reg_cpu(1, fmt.precision);
  const GptConfig keep_config = tiny_gpt(100, ClassifierLogits::Keep);
  GptModel reg_model(reg_cpu, keep_config, kBatch);
  const ParameterRegistry& reg = reg_model.parameters();
  const Inputs in = draw_inputs(rng, reg, fmt.precision);
  const size_t wte = reg.find("transformer.wte.weight");
  for (int threads : {1, 2})
    for (int chunk : {16, 100}) {
      SCOPED_TRACE(std::to_string(threads) + " threads, chunk " + std::to_string(chunk));
      CpuBackend keep_cpu(threads, fmt.precision), drop_cpu(threads, fmt.precision);
      GptModel keep_model(keep_cpu, tiny_gpt(chunk, ClassifierLogits::Keep), kBatch);
      GptModel drop_model(drop_cpu, tiny_gpt(chunk, ClassifierLogits::Drop), kBatch);
      const test::GptStepOutcome keep = test::run_gpt_micro_batches(keep_cpu, keep_model, kBatch, 64, in);
      const test::GptStepOutcome drop = test::run_gpt_micro_batches(drop_cpu, drop_model, kBatch, 64, in);
      ASSERT_EQ(drop.losses.size(), keep.losses.size());
      for (size_t m = 0; m < keep.losses.size(); ++m)
        EXPECT_EQ(test::bits_of(drop.losses[m]), test::bits_of(keep.losses[m])) << "micro-batch " << m;
      for (size_t t = 0; t < reg.size(); ++t) {
        const ParameterTensor& p = reg[t];
        size_t differ = 0;
        double diff_squares = 0, keep_squares = 0;
        for (size_t i = p.offset; i < p.offset + p.count; ++i) {
          const double a = fmt.widen(drop.grads[i]), b = fmt.widen(keep.grads[i]);
          differ += drop.grads[i].bits != keep.grads[i].bits;
          diff_squares += (a - b) * (a - b);
          keep_squares += b * b;
        }
        if (t != wte) {
          EXPECT_EQ(differ, 0u) << p.name << " differs from keep's";
          continue;
        }
        // wte: the head's FP32 sum in another order, rounded once (the head
        // test bounds that), then the embedding's 16-bit add, which may
        // cancel much of it: an element may move by an ulp of the head's
        // part, more than one of its own; the tensor, by far less than 2^-10
        // in norm in FP16 (a chunk's share lost or doubled moves it by ~1).
        // BF16's ulp is 8x FP16's: measured on 69 seeds, the worst tensor
        // moved by 2^-12.9 of its norm in BF16 (2^-15.5 in FP16), so BF16's
        // bound is 2^-11, 3.7x that.
        EXPECT_LE(std::sqrt(diff_squares), std::ldexp(std::sqrt(keep_squares), bf16 ? -11 : -10))
            << p.name << ": " << differ << " of " << p.count << " differ";
      }
      EXPECT_TRUE(test::same_halves(logits_by_rows(drop_cpu, drop_model, in), keep.logits))
          << "forward_rows' logits are not keep's forward()";
      EXPECT_TRUE(test::same_halves(drop.logits, keep.logits)) << "forward()'s logits are not keep's";
    }
}

// At T = 256 (R = 1024 rows): dropping [R, V] FP16 saves more than the
// chunk, dx [R, C] and d_wte's FP32 [V, C] cost (at T = 64 it would not).
TEST(GptDroppedLogits, PeakFallsByThePredictedAmountAndKindsMatchTheFormula) {
  std::mt19937_64 rng(test::test_seed());
  const int context = 256;
  CpuBackend reg_cpu(1);
  const GptConfig shape = tiny_gpt(0, ClassifierLogits::Keep, context);
  const size_t rows = static_cast<size_t>(kBatch) * context;
  const Inputs in =
      test::draw_gpt_step_inputs(rng, GptModel(reg_cpu, shape, kBatch).parameters(), rows, shape.real_vocab);
  for (int chunk : {16, 100}) {
    SCOPED_TRACE("chunk " + std::to_string(chunk));
    size_t peaks[2] = {};
    for (const ClassifierLogits logits : {ClassifierLogits::Keep, ClassifierLogits::Drop}) {
      CpuBackend cpu(2);
      GptModel model(cpu, tiny_gpt(chunk, logits, context), kBatch);
      peaks[logits == ClassifierLogits::Drop] =
          test::run_gpt_micro_batches(cpu, model, kBatch, context, in).train_peak_bytes;
      for (const ActivationKind& kind : model.activation_kinds())
        EXPECT_EQ(static_cast<double>(kind.bytes), kind.formula_bytes) << kind.name << " (" << kind.formula << ")";
    }
    const double predicted = classifier_bytes(rows, 1024, 48, chunk, true, ClassifierLogits::Keep).total() -
                             classifier_bytes(rows, 1024, 48, chunk, true, ClassifierLogits::Drop).total();
    EXPECT_GT(predicted, 0.0);
    EXPECT_EQ(static_cast<double>(peaks[0]) - static_cast<double>(peaks[1]), predicted)
        << "peaks " << peaks[0] << " (keep) and " << peaks[1] << " (drop)";
  }
}

// Through the trainer: eager with accumulation against keep, and emulated
// CUDA graphs (one micro-batch) against drop's own eager run on the same
// recording backend.
TEST_P(GptDroppedLogits, TrainingRunsEndWhereKeepsDo) {
  const Precision p = GetParam();
  const test::TempDir temp_dir("gpt_dropped");
  std::mt19937_64 rng(test::test_seed());
  const std::string path = temp_dir.path() + "/text.txt";
  test::write_random_letters(path, rng, 12000, 20);
  TrainConfig c = test::in_precision(test::gpt_text_run(tiny_gpt(100, ClassifierLogits::Keep), path, 64, 1024, 6), p);
  CpuBackend keep_cpu(2, p);
  const test::TrainingRun keep = test::train_with(keep_cpu, c);
  c.gpt.classifier_logits = ClassifierLogits::Drop;
  CpuBackend drop_cpu(2, p);
  const test::TrainingRun drop = test::train_with(drop_cpu, c);
  ASSERT_TRUE(std::isfinite(keep.summary.test_loss));
  // One bound for both formats: measured on 69 seeds, the runs ended at
  // most 1.7e-6 (FP16) and 6.6e-6 (BF16) apart, relative, so BF16's wider
  // roundings need no bound of their own.
  EXPECT_NEAR(drop.summary.test_loss, keep.summary.test_loss, 1e-3 * keep.summary.test_loss);

  c.grad_accum = 1;  // a captured step is one micro-batch
  RecordingBackend eager_backend(DeviceKind::Cuda, /*can_capture=*/true, p);
  const test::TrainingRun eager = test::train_with(eager_backend, c);
  c.cuda_graph = true;
  RecordingBackend recording(DeviceKind::Cuda, /*can_capture=*/true, p);
  const test::TrainingRun graphs = test::train_with(recording, c);
  EXPECT_GT(recording.replays, 0) << "no step was replayed";
  EXPECT_EQ(graphs.summary.test_loss, eager.summary.test_loss);
  EXPECT_EQ(graphs.master, eager.master);
}

INSTANTIATE_TEST_SUITE_P(Precisions, GptDroppedLogits, ::testing::ValuesIn(test::kBothPrecisions),
                         test::precision_test_name);

}  // namespace
}  // namespace ddp
