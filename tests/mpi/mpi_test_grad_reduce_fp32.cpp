// mpi_test_grad_reduce_fp32.cpp: --grad-reduce-dtype fp32 through the
// trainer on CPU ranks (CTest: 2, 3 and 4 ranks), in both precisions: every
// --zero stage with FP32 sums tracks --zero 0 with FP32 sums, the 16-bit
// weights bitwise identical on every rank after every step; hybrid sharding
// tracks --zero 0 too. An overflow on one rank skipping the step on all,
// with FP32 sums: mpi_test_zero.cpp. The sums themselves:
// mpi_test_fp32_sums.cpp; one rank, bit for bit the 16-bit path:
// tests/trainer/loop/test_grad_reduce_fp32.cpp.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <string>
#include <vector>

#include "comm/mpi_communicator.h"
#include "kernels/cpu/cpu_backend.h"
#include "mpi/mpi_test_support.h"
#include "mpi/mpi_zero_cases.h"
#include "support/lowp_format.h"
#include "support/precision_config.h"
#include "support/temp_dir.h"
#include "support/test_support.h"
#include "trainer/config/model_catalog.h"
#include "trainer/loop/trainer.h"

namespace ddp {
namespace {

class ZeroFp32Sums : public ::testing::TestWithParam<Precision> {};
using test::failures_anywhere;
using namespace test::zero_cases;

// Buckets of 4 KB: several per step, more than the reducer's two FP32
// staging buffers, so a bucket reuses one after its collective.
TrainConfig with_small_buckets(TrainConfig c) {
  c.bucket_mb = c.first_bucket_mb = 4.0 / 1024;
  return c;
}

// The bound: the stages differ only in the order of the FP32 adds (the
// transport's reduce-scatter against its all-reduce), an FP32 rounding,
// which can still flip a 16-bit weight's rounding and so the next steps'
// forward, and AdamW's first steps move a weight by about lr x sign(g).
// Measured (2-4 ranks, both precisions, 12 seeds each, 4 KB buckets): 0
// for the MLP; for the GPT with AdamW about 3e-5 typically and at most
// 3.8e-4. The 16-bit sums' bounds in mpi_test_zero.cpp are 2e-2 and 4e-2
// (measured 0.2-0.3%). Bounds: 1e-6 (MLP) and 2e-3 (GPT), 5x the worst
// seen and 10-20x below the 16-bit ones.
TEST_P(ZeroFp32Sums, EveryStageTracksStageZeroWithTheSameWeightsOnEveryRank) {
  MpiCommunicator comm(MPI_COMM_WORLD, 0, GetParam());
  const Case cases[] = {{"MLP SGD", false, false}, {"GPT AdamW clipped", true, true}};
  const test::TempDir own("mpi_zero_fp32_sums");
  CpuBackend cpu(1, GetParam());
  for (const Case& k : cases) {
    TrainConfig c = with_small_buckets(test::in_precision(case_config(k, own.path(), agreed_seed()), GetParam()));
    c.grad_reduce_fp32 = true;
    const TrainTestData data = load_train_test(c.data, c.seed);
    const ParameterRegistry registry = model_parameters(bind_model_to_data(c, data));
    Trainer replicated(c, cpu, comm, data);
    replicated.prepare();
    const std::vector<float> start = replicated.snapshot().master_weights_fp32;
    replicated.run();
    for (int stage : {1, 2, 3}) {
      const StepwiseRun sharded = run_stepwise(c, stage, cpu, comm, data, registry);
      EXPECT_EQ(failures_anywhere(sharded.bad), 0)
          << k.name << " --zero " << stage << ": 16-bit weights differ between ranks, or padding moved";
      EXPECT_EQ(failures_anywhere(static_cast<int>(sharded.skipped)), 0) << k.name << ": a step overflowed";
      const double rel =
          test::relative_update_difference(sharded.master, replicated.snapshot().master_weights_fp32, start);
      const double bound = k.gpt ? 2e-3 : 1e-6;
      EXPECT_EQ(failures_anywhere(!(rel < bound)), 0)
          << k.name << " --zero " << stage << ": relative update difference " << rel;
      if (comm.rank() == 0)
        std::printf("FP32 sums, --zero %d against --zero 0, %s, %d ranks: relative update difference %.3g\n", stage,
                    k.name, comm.world_size(), rel);
    }
  }
}

// Hybrid sharding (--zero-shard-size 1: every rank its own group, the
// sums all-reduced across the replicas) with FP32 sums tracks --zero 0.
TEST_P(ZeroFp32Sums, HybridShardingTracksStageZero) {
  MpiCommunicator world(MPI_COMM_WORLD, 0, GetParam());
  MpiCommunicator groups_of_one(MPI_COMM_WORLD, 1, GetParam());
  CpuBackend cpu(1, GetParam());
  TrainConfig c = with_small_buckets(test::in_precision(mlp_config(agreed_seed()), GetParam()));
  c.grad_reduce_fp32 = true;
  const TrainTestData data = load_train_test(c.data, c.seed);
  Trainer replicated(c, cpu, world, data);
  replicated.prepare();
  const std::vector<float> start = replicated.snapshot().master_weights_fp32;
  replicated.run();
  int bad = 0;
  for (const int stage : {1, 3}) {
    TrainConfig h = c;
    h.zero_stage = stage;
    h.zero_shard_size = 1;
    Trainer t(h, cpu, groups_of_one, data);
    t.prepare();
    t.run();
    bad += differs_from_root(t.weights_lowp());
    const double rel = test::relative_update_difference(t.snapshot().master_weights_fp32,
                                                        replicated.snapshot().master_weights_fp32, start);
    bad += !(rel < 1e-6);
    if (world.rank() == 0)
      std::printf("FP32 sums, --zero %d in groups of 1: relative update difference %.3g\n", stage, rel);
  }
  EXPECT_EQ(failures_anywhere(bad), 0);
}

INSTANTIATE_TEST_SUITE_P(Precisions, ZeroFp32Sums, ::testing::ValuesIn(test::kBothPrecisions),
                         test::precision_test_name);

}  // namespace
}  // namespace ddp
