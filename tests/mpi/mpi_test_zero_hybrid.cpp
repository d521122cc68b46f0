// mpi_test_zero_hybrid.cpp: hybrid sharding (--zero-shard-size G, FSDP's
// HSDP) on CPU ranks (CTest runs this binary with 2, 3 and 4 ranks; every G
// below the world that divides it: 1, and 2 at 4 ranks):
//   - every stage tracks --zero 0 within mpi_test_zero.cpp's tolerances, the
//     MLP and the GPT, SGD and AdamW clipped by the global norm, with and
//     without accumulation, and the FP16 weights are the same bits on every
//     rank (every replica steps the same sums);
//   - each rank holds its group's share of the state: summed over the world,
//     the sharded classes are the replicated ones times the replicas;
//   - a checkpoint written at one (stage, group size) restores unchanged at
//     another and continues within the tolerance, bitwise at its own.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "comm/mpi_communicator.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/error.h"
#include "mpi/mpi_test_support.h"
#include "mpi/mpi_trained_weights.h"
#include "mpi/mpi_zero_cases.h"
#include "support/lowp_format.h"
#include "support/precision_config.h"
#include "support/temp_dir.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/loop/trainer.h"

namespace ddp {
namespace {

class ZeroHybrid : public ::testing::TestWithParam<Precision> {};
using test::failures_anywhere;
using namespace test::zero_cases;

int world_size() {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  return world;
}

// The shard sizes below the world that divide it.
std::vector<int> group_sizes(int world) {
  std::vector<int> sizes;
  for (int g = 1; g < world; ++g)
    if (world % g == 0) sizes.push_back(g);
  return sizes;
}

TEST_P(ZeroHybrid, EveryStageAndGroupSizeTracksStageZero) {
  const Case cases[] = {{"MLP SGD", false, false},
                        {"MLP AdamW clipped", false, true},
                        {"GPT SGD", true, false},
                        {"GPT AdamW clipped", true, true}};
  const test::TempDir own("mpi_zero_hybrid");  // each rank its own text file
  MpiCommunicator world(MPI_COMM_WORLD, 0, GetParam());
  int bad = 0;
  double worst[2] = {0.0, 0.0};  // SGD's, AdamW's
  for (const Case& k : cases) {
    for (int64_t accum : {1, 2}) {
      TrainConfig c = test::in_precision(case_config(k, own.path(), agreed_seed()), GetParam());
      c.grad_accum = accum;
      const TrainTestData data = load_train_test(c.data, c.seed);
      const test::TrainedWeights replicated = test::train_weights(c, world, data);
      CpuBackend cpu(1, GetParam());
      Trainer unstarted(c, cpu, world, data);
      unstarted.prepare();
      const std::vector<float> start = unstarted.snapshot().master_weights_fp32;  // for the update's norm
      for (int g : group_sizes(world.world_size())) {
        MpiCommunicator groups(MPI_COMM_WORLD, g, GetParam());
        for (int stage : {1, 2, 3}) {
          TrainConfig z = c;
          z.zero_stage = stage;
          z.zero_shard_size = g;
          const test::TrainedWeights hybrid = test::train_weights(z, groups, data);
          const double rel = test::relative_update_difference(hybrid.master, replicated.master, start);
          // BF16: the bounds of mpi_test_zero.cpp's (its sums round 8x coarser).
          const bool bf16 = GetParam() == Precision::Bf16;
          const bool within = rel < (k.adamw ? (bf16 ? 4e-2 : 2e-2) : (bf16 ? 2e-2 : 5e-3));
          worst[k.adamw] = std::max(worst[k.adamw], rel);
          const bool same = test::same_as_rank0(hybrid.weights);
          bad += !within + !same;
          if (world.rank() == 0 && (!within || !same))
            std::printf("%s --grad-accum %lld --zero %d in groups of %d: relative update difference %.3g%s\n", k.name,
                        static_cast<long long>(accum), stage, g, rel, same ? "" : ", weights differ between ranks");
        }
      }
    }
  }
  EXPECT_EQ(failures_anywhere(bad), 0);
  if (world.rank() == 0)
    std::printf("hybrid against --zero 0, %d ranks: worst relative update difference %.3g (SGD), %.3g (AdamW)\n",
                world.world_size(), worst[0], worst[1]);
}

// Stage 3's prefetch depth changes when the gathers run, not what they
// move: in groups too, depths 0 and 2 train depth 1's bits.
TEST_P(ZeroHybrid, EveryPrefetchDepthTrainsTheSameBitsInGroups) {
  const test::TempDir own("mpi_zero_hybrid_prefetch");
  TrainConfig c =
      test::in_precision(case_config({"GPT AdamW clipped", true, true}, own.path(), agreed_seed()), GetParam());
  c.zero_stage = 3;
  const TrainTestData data = load_train_test(c.data, c.seed);
  int bad = 0;
  for (int g : group_sizes(world_size())) {
    MpiCommunicator groups(MPI_COMM_WORLD, g, GetParam());
    c.zero_shard_size = g;
    c.zero_prefetch = 1;
    const test::TrainedWeights depth_one = test::train_weights(c, groups, data);
    for (int depth : {0, 2}) {
      c.zero_prefetch = depth;
      const test::TrainedWeights other = test::train_weights(c, groups, data);
      bad += !test::same_bits(other.master, depth_one.master) + !test::same_bits(other.weights, depth_one.weights);
    }
  }
  EXPECT_EQ(failures_anywhere(bad), 0);
}

// A config that names a shard size its communicator was not made with is
// refused, not trained over the communicator's groups.
TEST_P(ZeroHybrid, ATrainerRefusesAShardSizeItsCommunicatorDoesNotHave) {
  const int n = world_size();
  const test::TempDir own("mpi_zero_hybrid_refusal");
  TrainConfig c = test::in_precision(case_config({"MLP SGD", false, false}, own.path(), 5), GetParam());
  c.zero_stage = 1;
  c.zero_shard_size = 1;
  MpiCommunicator world(MPI_COMM_WORLD, 0, GetParam());
  CpuBackend cpu(1, GetParam());
  EXPECT_THROW(Trainer(c, cpu, world, load_train_test(c.data, c.seed)), Error) << n << " ranks";
}

TEST_P(ZeroHybrid, EachRankHoldsItsGroupsShareOfTheState) {
  const test::TempDir own("mpi_zero_hybrid_memory");
  TrainConfig c = test::in_precision(case_config({"MLP AdamW", false, true}, own.path(), 3), GetParam());
  const TrainTestData data = load_train_test(c.data, c.seed);
  MpiCommunicator world(MPI_COMM_WORLD, 0, GetParam());
  CpuBackend cpu(1, GetParam());
  const StateBytes whole = Trainer(c, cpu, world, data).state_bytes();
  const auto summed = [&](size_t v) { return static_cast<size_t>(world.allreduce_sum_host(static_cast<double>(v))); };
  int bad = 0;
  for (int g : group_sizes(world.world_size())) {
    MpiCommunicator groups(MPI_COMM_WORLD, g, GetParam());
    const size_t replicas = static_cast<size_t>(groups.shard_replicas());
    for (int stage : {1, 2, 3}) {
      TrainConfig z = c;
      z.zero_stage = stage;
      z.zero_shard_size = g;
      const StateBytes held = Trainer(z, cpu, groups, data).state_bytes();
      bad += summed(held.fp32_masters) != replicas * whole.fp32_masters;
      bad += summed(held.optimizer_state) != replicas * whole.optimizer_state;
      if (stage >= 2) bad += summed(held.fp16_gradients) != replicas * whole.fp16_gradients;
      if (stage >= 3) bad += summed(held.fp16_weights) != replicas * whole.fp16_weights;
    }
  }
  EXPECT_EQ(failures_anywhere(bad), 0);
}

// Written in groups of 1 at --zero 3 (or 2 at 4 ranks), by the background
// writer (--async-checkpoint), the checkpoint resumes in the same groups bitwise, in groups of the whole world at
// --zero 1 and in groups of 1 at --zero 2 within the tolerance; and one
// written by the whole world at --zero 1 restores in groups at --zero 3.
TEST_P(ZeroHybrid, ACheckpointResumesAtAnotherStageAndGroupSize) {
  const int n = world_size();
  const int g = group_sizes(n).back();
  const test::SharedTempDir shared("mpi_zero_hybrid_ckpt");
  const test::TempDir text_dir("mpi_zero_hybrid_text");
  TrainConfig c =
      test::in_precision(case_config({"GPT AdamW", true, true}, text_dir.path(), agreed_seed()), GetParam());
  c.zero_stage = 3;
  c.zero_shard_size = g;
  c.steps = 12;
  CpuBackend cpu(1, GetParam());
  const TrainTestData data = load_train_test(c.data, c.seed);
  MpiCommunicator groups(MPI_COMM_WORLD, g, GetParam()), world(MPI_COMM_WORLD, 0, GetParam());

  Trainer whole(c, cpu, groups, data);
  whole.prepare();
  whole.run();
  const TrainState end = whole.snapshot();

  TrainConfig first = c;
  first.stop_after_steps = 6;
  first.checkpoint_dir = shared.path() + "/groups";
  first.async_checkpoint = true;  // the host copy and background write in groups too
  {
    Trainer t(first, cpu, groups, data);
    t.prepare();
    t.run();
  }
  MPI_Barrier(MPI_COMM_WORLD);  // rank 0 has written it
  const std::string path = first.checkpoint_dir + "/ckpt-step000000000006.safetensors";
  const TrainState saved = read_checkpoint(path);
  TrainConfig again = c;
  again.resume = true;
  again.resume_path = path;
  int bad = 0;
  double rel = 0.0;
  {
    Trainer t(again, cpu, groups, data);
    t.prepare();
    bad += state_differs(t.snapshot(), saved);
    t.run();
    bad += state_differs(t.snapshot(), end);
  }
  struct Elsewhere {
    int stage, shard_size;
    Communicator& comm;
  };
  MpiCommunicator singles(MPI_COMM_WORLD, 1, GetParam());
  for (const Elsewhere& e : {Elsewhere{1, n, world}, Elsewhere{2, 1, singles}}) {
    TrainConfig other = again;
    other.zero_stage = e.stage;
    other.zero_shard_size = e.shard_size;
    Trainer t(other, cpu, e.comm, data);
    t.prepare();
    bad += state_differs(t.snapshot(), saved);
    t.run();
    rel = std::max(rel, test::relative_update_difference(t.snapshot().master_weights_fp32, end.master_weights_fp32,
                                                         saved.master_weights_fp32));
  }
  EXPECT_EQ(failures_anywhere(bad), 0) << "a restore differs, or the same groups did not resume bitwise";
  EXPECT_EQ(failures_anywhere(!(rel < 2e-2)), 0) << "resumed elsewhere, relative update difference " << rel;

  TrainConfig by_world = c;
  by_world.zero_stage = 1;
  by_world.zero_shard_size = 0;
  by_world.stop_after_steps = 6;
  by_world.checkpoint_dir = shared.path() + "/world";
  {
    Trainer t(by_world, cpu, world, data);
    t.prepare();
    t.run();
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const std::string world_path = by_world.checkpoint_dir + "/ckpt-step000000000006.safetensors";
  TrainConfig in_groups = again;
  in_groups.resume_path = world_path;
  Trainer t(in_groups, cpu, groups, data);
  t.prepare();
  EXPECT_EQ(failures_anywhere(state_differs(t.snapshot(), read_checkpoint(world_path))), 0);
  if (world.rank() == 0) std::printf("resumed in other groups: relative update difference %.3g\n", rel);
}

INSTANTIATE_TEST_SUITE_P(Precisions, ZeroHybrid, ::testing::ValuesIn(test::kBothPrecisions), test::precision_test_name);

}  // namespace
}  // namespace ddp
