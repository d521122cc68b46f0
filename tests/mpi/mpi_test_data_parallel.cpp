// mpi_test_data_parallel.cpp: the training semantics of data parallelism,
// checked on CPU ranks under mpiexec (CTest runs this binary with 2, 3 and 4
// ranks): N ranks at per-rank batch B/N against one rank at batch B, bitwise
// identical masters on every rank after every step (with accumulation and
// predivision), an overflow on one rank skipping the step everywhere (also
// through a storm of them), and an evaluation that counts every test sample
// exactly once.
#include <gtest/gtest.h>

#include <cstdio>
#include <mpi.h>

#include <cmath>
#include <random>

#include "comm/mpi_communicator.h"
#include "kernels/cpu/cpu_backend.h"
#include "trainer/loop/evaluator.h"
#include "trainer/models/mlp/mlp_model.h"
#include "trainer/params/parameter_store.h"
#include "trainer/data/synthetic_data.h"
#include "trainer/loop/trainer.h"
#include "mpi/mpi_test_support.h"
#include "support/lowp_format.h"
#include "support/precision_config.h"
#include "support/sampler_batches.h"
#include "support/test_support.h"

namespace ddp {
namespace {

class DataParallel : public ::testing::TestWithParam<Precision> {};
using test::failures_anywhere;

// A seed every rank agrees on (rank 0's clock), so each run draws new data.
uint64_t shared_seed() {
  uint64_t seed = std::random_device{}();
  MPI_Bcast(&seed, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  return seed;
}

TrainConfig small_regression(uint64_t seed) {
  TrainConfig c;
  c.data.kind = "synthetic";
  c.mlp.layer_widths = {10, 32, 10};
  c.loss = LossKind::MeanSquaredError;
  c.loss_name = "mse";
  c.log_every = 1000;
  c.lr = 0.05;
  c.seed = seed;
  c.lr_schedule = LrScheduleKind::Constant;
  c.data.synthetic_train_samples = 960;
  c.data.synthetic_test_samples = 120;  // divisible by 1..4 x 8
  return c;
}

// K steps of N ranks at B/N each against K steps of one rank at B (each rank
// computes the one-rank reference itself). No shuffle, so both see the same
// samples per step; they differ only by FP16 rounding: per-rank FP16
// gradients summed in FP16 against one FP16 GEMM over all B rows. Tolerance:
// 0.5% of the update's L2 norm after 20 steps (measured 1.3e-4 to 5e-4 with
// 2, 3 and 4 ranks; a wrong average, e.g. a sum not divided by N, is >= 50%).
TEST_P(DataParallel, NRanksMatchOneRankAtTheSameGlobalBatch) {
  MpiCommunicator comm(MPI_COMM_WORLD, 0, GetParam());
  const int n = comm.world_size();
  TrainConfig c = test::in_precision(small_regression(shared_seed() % 100000), GetParam());
  c.shuffle = false;
  c.steps = 20;
  // A scale at which no step overflows: the FP16 sum over N ranks is N times
  // one rank's gradient and would overflow at 65536 where one rank's does not
  // (a real difference, which --grad-predivide addresses), skipping steps.
  c.loss_scaler.init_scale = 1024;
  c.global_batch = 96;  // divisible by 2, 3 and 4

  CpuBackend cpu(1, GetParam());
  const TrainTestData data = load_train_test(c.data, c.seed);
  const ParameterRegistry registry = mlp_parameters(c.mlp.layer_widths);
  const std::vector<float> start = registry.pack(registry.initial_values(c.seed));  // as snapshots hold them

  Trainer parallel(c, cpu, comm, data);
  parallel.prepare();
  const TrainSummary p = parallel.run();
  SingleProcessCommunicator alone;
  Trainer reference(c, cpu, alone, data);  // global batch 96 on one rank
  reference.prepare();
  const TrainSummary r = reference.run();
  ASSERT_EQ(failures_anywhere(p.skipped_steps + r.skipped_steps), 0) << "a step overflowed";

  const double rel = test::relative_update_difference(parallel.snapshot().master_weights_fp32,
                                                      reference.snapshot().master_weights_fp32, start);
  // BF16's sums round 8x coarser than FP16's (2^-8 against 2^-11): 4x the
  // bound; measured 0.12% to 0.20% at 2 to 4 ranks.
  const double bound = GetParam() == Precision::Bf16 ? 2e-2 : 5e-3;
  EXPECT_EQ(failures_anywhere(!(rel < bound)), 0) << "relative update difference " << rel << " with " << n << " ranks";
  if (comm.rank() == 0)
    std::printf("%s, %d ranks against one: relative update difference %.3g\n", precision_name(GetParam()), n, rel);
}

// Drives a Trainer one step at a time (run() with --stop-after-steps 1
// continues where it stopped) and checks every rank's masters against rank
// 0's after each step. Gradient accumulation and predivision are on, and an
// overflow is injected on the last rank only at two steps: every rank must
// skip exactly those steps (weights unchanged) and keep the same scale.
TEST_P(DataParallel, RanksIdenticalAfterEveryStepAndOneRankOverflowSkipsEverywhere) {
  MpiCommunicator comm(MPI_COMM_WORLD, 0, GetParam());
  const int n = comm.world_size();
  TrainConfig c =
      test::in_precision(small_regression(shared_seed() % 100000 + comm.rank()), GetParam());  // rank 0's init must win
  c.steps = 24;
  c.stop_after_steps = 1;
  c.grad_accum = 2;
  c.global_batch = 16 * 2 * n;
  c.grad_predivide = 2.0;
  c.inject_overflow_steps = {5, 11};
  c.inject_overflow_rank = n - 1;
  c.loss_scaler.mode = LossScaleMode::Dynamic;  // bf16 too: its backoffs must agree as well
  c.loss_scaler.hysteresis = 1;
  c.loss_scaler.init_scale = 1024;  // no natural overflow: only the injected steps may skip

  CpuBackend cpu(1, GetParam());
  Trainer t(c, cpu, comm, load_train_test(c.data, 7));
  t.prepare();
  int bad = 0;
  std::vector<float> before = t.snapshot().master_weights_fp32;
  for (int64_t step = 1; step <= c.steps; ++step) {
    const TrainSummary s = t.run();
    const TrainState st = t.snapshot();
    std::vector<float> root = st.master_weights_fp32;
    comm.broadcast_bytes(root.data(), root.size() * sizeof(float), 0);
    bad += root != st.master_weights_fp32;
    double scale_root = st.scaler.scale;
    comm.broadcast_bytes(&scale_root, sizeof scale_root, 0);
    bad += scale_root != st.scaler.scale;
    const bool injected = step == 5 || step == 11;
    bad += (st.master_weights_fp32 == before) != injected;  // skipped exactly when injected
    bad += s.final_step != step;
    before = st.master_weights_fp32;
  }
  const TrainState end = t.snapshot();
  bad += end.skipped_steps != 2;
  bad += end.scaler.scale != c.loss_scaler.init_scale / 4;  // two backoffs by 0.5, no growth in 24 steps
  EXPECT_EQ(failures_anywhere(bad), 0);
}

// Each rank trains on its own shard of the sampler's order, micro-batch by
// micro-batch, with every batch but the first copied one ahead: 37 samples
// (padded for 2, 3 and 4 ranks, or cut with --drop-last), 2 micro-batches of
// 4 per step, short last steps, three epochs.
TEST_P(DataParallel, EveryRankTrainsOnItsShardOneBatchAhead) {
  MpiCommunicator comm(MPI_COMM_WORLD, 0, GetParam());
  const int n = comm.world_size();
  int bad = 0;
  for (bool drop_last : {false, true}) {
    TrainConfig c = test::in_precision(small_regression(shared_seed() % 100000), GetParam());
    c.data.synthetic_train_samples = 37;
    c.drop_last = drop_last;
    c.batch_size = 4;
    c.grad_accum = 2;
    const int64_t per_rank = drop_last ? 37 / n : (37 + n - 1) / n;
    c.steps = 3 * (drop_last ? per_rank / 8 : (per_rank + 7) / 8);
    const auto want = test::sampler_batches(37, comm.rank(), n, c.seed, c.shuffle, c.drop_last, 4, 2, c.steps);

    CpuBackend cpu(1, GetParam());
    Trainer t(c, cpu, comm, load_train_test(c.data, c.seed));
    std::vector<std::vector<uint32_t>> got;
    t.observe_batches([&got](const uint32_t* indices, int rows) { got.emplace_back(indices, indices + rows); });
    t.prepare();
    t.run();
    EXPECT_EQ(got, want) << "rank " << comm.rank() << (drop_last ? ", --drop-last" : "");
    EXPECT_EQ(t.loader_counts().loaded_on_demand, 1) << "rank " << comm.rank();
    bad += got != want || t.loader_counts().loaded_on_demand != 1;
  }
  EXPECT_EQ(failures_anywhere(bad), 0);
}

// An overflow storm on the last rank only (every 5th step for 500 steps,
// with hysteresis and a floor): every rank skips exactly the same 100 steps
// (same count, same masters, same scale as rank 0 at the end) and the model
// still learns.
TEST_P(DataParallel, OverflowStormSkipsTheSameStepsOnEveryRank) {
  MpiCommunicator comm(MPI_COMM_WORLD, 0, GetParam());
  const int n = comm.world_size();
  TrainConfig c = test::in_precision(small_regression(shared_seed() % 100000), GetParam());
  c.steps = 500;
  c.global_batch = 16 * n;
  c.inject_overflow_every = 5;
  c.inject_overflow_rank = n - 1;
  c.loss_scaler.mode = LossScaleMode::Dynamic;  // bf16 too: its backoffs must agree as well
  c.loss_scaler.hysteresis = 2;
  c.loss_scaler.min_scale = 1;
  c.loss_scaler.init_scale = 1024;

  CpuBackend cpu(1, GetParam());
  Trainer t(c, cpu, comm, load_train_test(c.data, c.seed));
  t.prepare();
  const TrainSummary s = t.run();
  const TrainState st = t.snapshot();
  int bad = 0;
  bad += s.skipped_steps != 100;
  std::vector<float> root = st.master_weights_fp32;
  comm.broadcast_bytes(root.data(), root.size() * sizeof(float), 0);
  bad += root != st.master_weights_fp32;
  double scale_root = st.scaler.scale;
  comm.broadcast_bytes(&scale_root, sizeof scale_root, 0);
  bad += scale_root != st.scaler.scale || st.scaler.scale != 1;  // 10 backoffs from 1024 reach the floor
  bad += !(s.test_loss < 0.05);
  EXPECT_EQ(failures_anywhere(bad), 0) << "skipped " << s.skipped_steps << ", scale " << st.scaler.scale
                                       << ", test loss " << s.test_loss;
}

// The 16-bit buffers are the backend's format and the sums the
// communicator's: a Trainer whose config names another precision than
// either is refused in one line naming --precision, before it trains.
TEST_P(DataParallel, ATrainerRefusesABackendOrCommunicatorOfAnotherPrecision) {
  const Precision other = GetParam() == Precision::Bf16 ? Precision::Fp16 : Precision::Bf16;
  MpiCommunicator comm(MPI_COMM_WORLD, 0, GetParam()), comm_other(MPI_COMM_WORLD, 0, other);
  TrainConfig c = test::in_precision(small_regression(shared_seed() % 100000), GetParam());
  c.global_batch = 16 * comm.world_size();
  const TrainTestData data = load_train_test(c.data, c.seed);
  CpuBackend cpu(1, GetParam()), cpu_other(1, other);
  int bad = 0;
  const auto refused = [&](Backend& be, Communicator& co, const char* what) {
    try {
      Trainer t(c, be, co, data);
    } catch (const Error& e) {
      const std::string text = e.what();
      return text.find("--precision") != std::string::npos && text.find(what) != std::string::npos;
    }
    return false;
  };
  bad += !refused(cpu_other, comm, "backend");
  if (comm.world_size() > 1) bad += !refused(cpu, comm_other, "communicator");
  Trainer fine(c, cpu, comm, data);  // the same precision everywhere is accepted
  EXPECT_EQ(failures_anywhere(bad), 0);
}

// A classification test set whose size does not divide by N: every sample
// counted once, and the all-reduced loss/accuracy equal one rank's.
TEST_P(DataParallel, EvaluationCountsEveryTestSampleOnce) {
  MpiCommunicator comm(MPI_COMM_WORLD, 0, GetParam());
  SingleProcessCommunicator alone;
  const uint64_t seed = shared_seed();
  std::mt19937_64 rng(seed);
  Dataset test;
  test.count = 1003;
  test.features = 12;
  test.num_classes = 5;
  test.x.resize(test.count * test.features);
  for (float& v : test.x) v = std::uniform_real_distribution<float>(-1, 1)(rng);
  for (size_t i = 0; i < test.count; ++i) test.labels.push_back(static_cast<int32_t>(rng() % 5));

  CpuBackend cpu(1, GetParam());
  MlpConfig mlp;
  mlp.layer_widths = {12, 20, 5};
  MlpModel model(cpu, mlp, 64);
  ParameterStore params(cpu, model.parameters());
  params.set_master_weights(model.parameters().initial_values(seed));

  const EvalResult all = evaluate(cpu, comm, model, test, LossKind::SoftmaxCrossEntropy, params.weights_lowp.data());
  const EvalResult one = evaluate(cpu, alone, model, test, LossKind::SoftmaxCrossEntropy, params.weights_lowp.data());
  int bad = 0;
  bad += all.samples != 1003 || one.samples != 1003;
  bad += all.correct != one.correct;
  bad += !(std::fabs(all.loss - one.loss) <= 1e-6 * std::fabs(one.loss));  // sums in another order
  EXPECT_EQ(failures_anywhere(bad), 0) << all.samples << " " << all.correct << "/" << one.correct << " " << all.loss
                                       << " vs " << one.loss;
}

INSTANTIATE_TEST_SUITE_P(Precisions, DataParallel, ::testing::ValuesIn(test::kBothPrecisions),
                         test::precision_test_name);

}  // namespace
}  // namespace ddp
