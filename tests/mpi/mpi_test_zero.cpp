// mpi_test_zero.cpp: --zero 1, 2 and 3 (masters and optimizer state
// sharded; then the FP16 gradients; then the FP16 weights, gathered per
// layer) on CPU ranks (CTest runs this binary with 2, 3 and 4 ranks): each
// tracks --zero 0 at the same global batch for the MLP and the GPT, SGD and
// AdamW (clipped by the global norm), with the FP16 weights bitwise
// identical on every rank after every step; an overflow on one rank skips
// the step on all; a checkpoint of a sharded run resumes unchanged at
// another stage and world size; the state per rank follows the formula.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "comm/mpi_communicator.h"
#include "kernels/cpu/cpu_backend.h"
#include "mpi/mpi_gpt_config.h"
#include "mpi/mpi_test_support.h"
#include "mpi/mpi_zero_cases.h"
#include "support/temp_dir.h"
#include "support/lowp_format.h"
#include "support/precision_config.h"
#include "support/test_support.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/config/model_catalog.h"
#include "trainer/zero/sharded_state.h"
#include "trainer/loop/trainer.h"

namespace ddp {
namespace {

class Zero : public ::testing::TestWithParam<Precision> {};
using test::failures_anywhere;
using namespace test::zero_cases;

// Tolerance: 0.5% of the update's L2 norm after 8 steps, the data-parallel
// bound (mpi_test_data_parallel.cpp): the two differ at most by the order
// of the FP16 sums (the transport's reduce-scatter against its all-reduce).
// AdamW's: 2%. Its first steps move each weight by about lr * sign(g), so
// an element whose FP16 sum rounds to 0 in one order and to a tiny value in
// the other moves by a whole lr in one run only; over 40 seeds at 4 ranks
// the MLP's worst was 0.45%, and seed 45664 gives 1.03% (DDP_TEST_SEED=45664).
// A stage that loses a range's update (100%), clips by a local norm (21%),
// or sums without dividing is off by far more.
TEST_P(Zero, EveryStageTracksStageZeroWithTheSameWeightsOnEveryRank) {
  MpiCommunicator comm(MPI_COMM_WORLD, 0, GetParam());
  const Case cases[] = {{"MLP SGD", false, false},
                        {"MLP AdamW clipped", false, true},
                        {"GPT SGD", true, false},
                        {"GPT AdamW clipped", true, true}};
  const test::TempDir own("mpi_zero");  // each rank its own text file
  const std::string& dir = own.path();
  CpuBackend cpu(1, GetParam());
  for (const Case& k : cases) {
    const uint64_t seed = agreed_seed();
    TrainConfig c = test::in_precision(case_config(k, dir, seed), GetParam());
    const TrainTestData data = load_train_test(c.data, c.seed);
    const ParameterRegistry registry = model_parameters(bind_model_to_data(c, data));

    Trainer replicated(c, cpu, comm, data);
    replicated.prepare();
    const std::vector<float> start = replicated.snapshot().master_weights_fp32;
    const TrainSummary r = replicated.run();
    for (int stage : {1, 2, 3}) {
      const StepwiseRun sharded = run_stepwise(c, stage, cpu, comm, data, registry);
      EXPECT_EQ(failures_anywhere(sharded.bad), 0)
          << k.name << " --zero " << stage << ": FP16 weights differ between ranks, or padding moved";
      EXPECT_EQ(failures_anywhere(static_cast<int>(r.skipped_steps + sharded.skipped)), 0)
          << k.name << ": a step overflowed";
      const double rel =
          test::relative_update_difference(sharded.master, replicated.snapshot().master_weights_fp32, start);
      // BF16 sums round 8x coarser (2^-8 against 2^-11): 4x the bound
      // for SGD, 2x for AdamW (whose spread is its sign flips, not the
      // rounding); measured at 4 ranks: 0.29% (GPT SGD) and 0.22% (GPT
      // AdamW), against the failures above (21%, 100%).
      const bool bf16 = GetParam() == Precision::Bf16;
      const double bound = k.adamw ? (bf16 ? 4e-2 : 2e-2) : (bf16 ? 2e-2 : 5e-3);
      EXPECT_EQ(failures_anywhere(!(rel < bound)), 0)
          << k.name << " --zero " << stage << ": relative update difference " << rel;
      if (comm.rank() == 0)
        std::printf(
            "--zero %d against --zero 0, %s, %d ranks: relative update "
            "difference %.3g\n",
            stage, k.name, comm.world_size(), rel);
    }
  }
}

// An overflow injected on the last rank lands in element 0, which rank 0
// owns: only rank 0's check sees it, and the MAX of the flag must skip the
// step on every rank (with predivision on, and accumulation where the stage
// allows it: stage 2 keeps whole gradients then, stage 3 whole gradients
// with sharded weights). With 16-bit sums and with FP32 ones
// (--grad-reduce-dtype fp32, in 4 KB buckets: several, the reducer's
// staging reused); at stage 0 the Inf reaches every rank's sum.
TEST_P(Zero, OverflowOnOneRankSkipsTheStepOnEveryRank) {
  MpiCommunicator comm(MPI_COMM_WORLD, 0, GetParam());
  const int n = comm.world_size();
  struct StageAccum {
    int stage;
    int64_t accum;
    bool fp32_sums;
  };
  for (const StageAccum sa :
       {StageAccum{1, 2, false}, StageAccum{2, 1, false}, StageAccum{3, 1, false}, StageAccum{3, 2, false},
        StageAccum{0, 2, true}, StageAccum{1, 2, true}, StageAccum{2, 1, true}, StageAccum{3, 2, true}}) {
    TrainConfig c = test::in_precision(mlp_config(agreed_seed()), GetParam());
    c.grad_reduce_fp32 = sa.fp32_sums;
    if (sa.fp32_sums) c.bucket_mb = c.first_bucket_mb = 4.0 / 1024;
    c.zero_stage = sa.stage;
    c.steps = 16;
    c.stop_after_steps = 1;
    c.grad_accum = sa.accum;
    c.global_batch = 8 * sa.accum * n;
    c.grad_predivide = 2.0;
    c.inject_overflow_steps = {5, 11};
    c.inject_overflow_rank = n - 1;
    c.loss_scaler.mode = LossScaleMode::Dynamic;  // bf16 too: its backoffs must agree as well
    c.loss_scaler.hysteresis = 1;
    CpuBackend cpu(1, GetParam());
    Trainer t(c, cpu, comm, load_train_test(c.data, 7));
    t.prepare();
    const size_t flat = t.weights_lowp().size();
    ASSERT_GT(zero_shard_layout(flat, n).range(0).count(), 0u) << "rank 0 must own element 0";
    int bad = 0;
    std::vector<lowp16> before = t.weights_lowp();
    for (int64_t step = 1; step <= c.steps; ++step) {
      t.run();
      const std::vector<lowp16> now = t.weights_lowp();
      bad += differs_from_root(now);
      const bool injected = step == 5 || step == 11;
      bad += (std::memcmp(now.data(), before.data(), now.size() * sizeof(lowp16)) == 0) != injected;
      before = now;
    }
    const TrainState end = t.snapshot();
    bad += end.skipped_steps != 2;
    bad += end.scaler.scale != c.loss_scaler.init_scale / 4;  // two backoffs by 0.5, no growth in 16 steps
    EXPECT_EQ(failures_anywhere(bad), 0) << "--zero " << sa.stage << " --grad-accum " << sa.accum
                                         << (sa.fp32_sums ? " --grad-reduce-dtype fp32" : "");
  }
}

// A --zero 3 run's checkpoint holds the whole state: it restores unchanged
// at --zero 0 and --zero 1 on one rank and at --zero 3 and --zero 1 on N,
// continues bitwise at the world and stage it was written with, and within
// the data-parallel tolerance elsewhere.
TEST_P(Zero, ACheckpointOfAShardedRunResumesAtAnyStageAndWorldSize) {
  MpiCommunicator comm(MPI_COMM_WORLD, 0, GetParam());
  const test::SharedTempDir shared("mpi_zero_ckpt");
  const std::string& dir = shared.path();
  const test::TempDir text_dir("mpi_zero_text");  // each rank its own text file
  TrainConfig c =
      test::in_precision(case_config({"GPT AdamW", true, true}, text_dir.path(), agreed_seed()), GetParam());
  c.zero_stage = 3;
  c.steps = 12;
  CpuBackend cpu(1, GetParam());
  const TrainTestData data = load_train_test(c.data, c.seed);

  Trainer whole(c, cpu, comm, data);  // uninterrupted, no checkpoints
  whole.prepare();
  whole.run();
  const TrainState end = whole.snapshot();

  TrainConfig first = c;
  first.stop_after_steps = 6;
  first.checkpoint_dir = dir;
  {
    Trainer t(first, cpu, comm, data);
    t.prepare();
    t.run();
  }
  MPI_Barrier(MPI_COMM_WORLD);  // rank 0 has written it
  const std::string path = dir + "/ckpt-step000000000006.safetensors";
  const TrainState saved = read_checkpoint(path);
  const std::vector<float> start = saved.master_weights_fp32;

  TrainConfig again = c;
  again.resume = true;
  again.resume_path = path;
  int bad = 0;
  {
    Trainer t(again, cpu, comm, data);
    t.prepare();
    bad += state_differs(t.snapshot(), saved);
    t.run();
    bad += state_differs(t.snapshot(),
                         end);  // same world, same stage: the same bits
  }
  EXPECT_EQ(failures_anywhere(bad), 0) << "resumed at --zero 3 on " << comm.world_size() << " ranks";

  double rel = 0.0;
  {
    TrainConfig stage_one = again;
    stage_one.zero_stage = 1;
    Trainer t(stage_one, cpu, comm, data);
    t.prepare();
    bad += state_differs(t.snapshot(), saved);
    t.run();
    rel = test::relative_update_difference(t.snapshot().master_weights_fp32, end.master_weights_fp32, start);
  }
  if (comm.rank() == 0) {
    for (int stage : {0, 1}) {
      TrainConfig alone_cfg = again;
      alone_cfg.zero_stage = stage;
      SingleProcessCommunicator alone;
      Trainer t(alone_cfg, cpu, alone, data);
      t.prepare();
      bad += state_differs(t.snapshot(), saved);
      t.run();
      rel = std::max(
          rel, test::relative_update_difference(t.snapshot().master_weights_fp32, end.master_weights_fp32, start));
    }
  }
  EXPECT_EQ(failures_anywhere(bad), 0) << "restored state differs on one rank";
  EXPECT_EQ(failures_anywhere(!(rel < 5e-3)), 0) << "one rank continued " << rel << " away";
  if (comm.rank() == 0) std::printf("resumed on one rank: relative update difference %.3g\n", rel);
}

// A model smaller than one alignment unit per rank leaves the first ranks
// with empty ranges (the last owns everything): every rank still takes the
// same collectives and optimizer steps (a count of 0 on null buffers, which
// both backends accept: optimizer_preconditions.h), and every stage trains
// as --zero 0 does, with SGD (momentum) and AdamW, with 16-bit sums and
// with FP32 ones (--grad-reduce-dtype fp32: an empty range sums into no
// FP32 buffer at all).
TEST_P(Zero, RanksWithEmptyRangesTrainAlongAtEveryStage) {
  MpiCommunicator comm(MPI_COMM_WORLD, 0, GetParam());
  for (const int variant : {0, 1, 2}) {
    const bool adamw = variant == 1, fp32_sums = variant == 2;
    TrainConfig c = test::in_precision(mlp_config(agreed_seed()), GetParam());
    c.grad_reduce_fp32 = fp32_sums;
    c.mlp.layer_widths = {10, 4};  // 44 parameters, 48 in the layout: one unit of 64
    c.steps = 6;
    c.shuffle = false;
    if (adamw) {
      c.optimizer = OptimizerKind::AdamW;
      c.lr = 3e-3;
    }
    CpuBackend cpu(1, GetParam());
    const TrainTestData data = load_train_test(c.data, c.seed);
    ASSERT_EQ(zero_shard_layout(48, comm.world_size()).range(0).count(), 0u);
    Trainer replicated(c, cpu, comm, data);
    replicated.prepare();
    const std::vector<float> start = replicated.snapshot().master_weights_fp32;
    replicated.run();
    int bad = 0;
    for (int stage : {1, 2, 3}) {
      TrainConfig z = c;
      z.zero_stage = stage;
      Trainer t(z, cpu, comm, data);
      t.prepare();
      t.run();
      bad += differs_from_root(t.weights_lowp());
      const double rel = test::relative_update_difference(t.snapshot().master_weights_fp32,
                                                          replicated.snapshot().master_weights_fp32, start);
      // The tolerances of the test above, but AdamW's at 10%: with 44
      // weights, one whose 16-bit sum is 0 in one order and not in the
      // other moves by a whole lr in one run only, which is 3.9% of the
      // update here (BF16, 4 ranks, DDP_TEST_SEED=14896; 0.26% the worst
      // of 31 other seeds). A lost range (100%) or a local norm (21%)
      // stays far outside.
      bad += !(rel < (adamw ? 1e-1 : 5e-3));
    }
    EXPECT_EQ(failures_anywhere(bad), 0) << (adamw ? "AdamW" : "SGD") << (fp32_sums ? ", FP32 sums" : "");
  }
}

// The state bytes per rank follow the ZeRO formula (memory_report.h) to
// within the layout's padding and one alignment unit of imbalance, and the
// sharded classes add up over the ranks to exactly the replicated ones:
// nothing is held twice, nothing is lost.
TEST_P(Zero, StateBytesPerRankFollowTheFormula) {
  MpiCommunicator comm(MPI_COMM_WORLD, 0, GetParam());
  const int n = comm.world_size();
  const test::TempDir own("mpi_zero_memory");
  const std::string& dir = own.path();
  int bad = 0;
  for (const Case& k : {Case{"MLP AdamW", false, true}, Case{"GPT SGD", true, false}}) {
    TrainConfig c = test::in_precision(case_config(k, dir, 3), GetParam());
    const TrainTestData data = load_train_test(c.data, c.seed);
    StateBytes held[4];
    size_t parameters = 0, padding = 0;
    for (int stage : {0, 1, 2, 3}) {
      c.zero_stage = stage;
      CpuBackend cpu(1, GetParam());
      Trainer t(c, cpu, comm, data);
      held[stage] = t.state_bytes();
      parameters = t.snapshot().master_weights_fp32.size();
      padding = t.weights_lowp().size() - parameters;
      const ZeroFormula f = zero_formula_bytes(stage, n, parameters, k.adamw);
      // Bytes per parameter sharded from stage 1: K (master and optimizer
      // state) and the extras (FP32 gradient, AdamW's mask): 12 + 5 or 8 + 4;
      // from stage 2 the FP16 gradient's 2, at stage 3 the FP16 weight's 2.
      const double k_extras = k.adamw ? 17.0 : 12.0;
      const double sharded = stage == 0 ? 0.0 : k_extras + (stage >= 2 ? 2.0 : 0.0) + (stage >= 3 ? 2.0 : 0.0);
      const double per_element = 4.0 + k_extras - sharded + sharded / n;
      const double slack = padding * (4.0 + k_extras) + kZeroShardAlignElements * (4.0 + k_extras);
      const double measured = static_cast<double>(held[stage].total());
      bad += !(measured >= f.ours_bytes - slack && measured <= f.ours_bytes + slack);
      bad += !(f.ours_bytes > per_element * parameters * 0.999 && f.ours_bytes < per_element * parameters * 1.001);
      if (comm.rank() == 0)
        std::printf(
            "%s --zero %d, %d ranks: state %zu bytes per rank, formula "
            "%.0f (+ extras %.0f)\n",
            k.name, stage, n, held[stage].total(), f.paper_bytes, f.ours_bytes);
    }
    auto summed = [&](size_t v) { return static_cast<size_t>(comm.allreduce_sum_host(static_cast<double>(v))); };
    for (int stage : {1, 2, 3}) {
      bad += summed(held[stage].fp32_masters) != held[0].fp32_masters;
      bad += summed(held[stage].optimizer_state) != held[0].optimizer_state;
      bad += summed(held[stage].fp32_gradients) != held[0].fp32_gradients;
      bad += (stage >= 2 ? summed(held[stage].fp16_gradients) : held[stage].fp16_gradients) != held[0].fp16_gradients;
      bad += (stage >= 3 ? summed(held[stage].fp16_weights) : held[stage].fp16_weights) != held[0].fp16_weights;
    }
  }
  EXPECT_EQ(failures_anywhere(bad), 0);
}

INSTANTIATE_TEST_SUITE_P(Precisions, Zero, ::testing::ValuesIn(test::kBothPrecisions), test::precision_test_name);

}  // namespace
}  // namespace ddp
