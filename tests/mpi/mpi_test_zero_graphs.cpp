// mpi_test_zero_graphs.cpp: --zero 1 with --cuda-graph on CPU ranks. The
// step's capture is emulated (support/recording_backend.h) and so is NCCL
// where the two meet (support/nccl_staging_communicator.h): the step's
// collectives are recorded with its kernels and replayed, and the padded
// staging of uneven layouts may not grow once a step has been captured.
// On GPUs this needs two of them; here every rank count CTest runs.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "comm/mpi_communicator.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/error.h"
#include "mpi/mpi_test_support.h"
#include "mpi/mpi_zero_cases.h"
#include "support/lowp_format.h"
#include "support/precision_config.h"
#include "support/nccl_staging_communicator.h"
#include "support/recording_backend.h"
#include "support/test_support.h"
#include "trainer/data/data_source.h"
#include "trainer/config/model_catalog.h"
#include "trainer/loop/trainer.h"
#include "trainer/zero/sharded_state.h"

namespace ddp {
namespace {
using test::failures_anywhere;
using test::zero_cases::state_differs;

// The ZeRO suites' MLP run (mpi_zero_cases.h) at --zero 1, smaller.
TrainConfig stage_one_config() {
  TrainConfig c = test::zero_cases::mlp_config(test::zero_cases::agreed_seed());
  // 856 elements in the layout, not a multiple of the 64-element unit: the
  // ZeRO layout is uneven at every world size, so its collectives (and the
  // FP32 gathers, twice as wide) go through NCCL's padded staging.
  c.mlp.layer_widths = {10, 40, 10};
  c.shuffle = false;
  c.zero_stage = 1;
  c.steps = 8;
  return c;
}

// The checkpoints after the capture gather the FP32 state as FP16 pairs,
// twice the widest layout the captured step moves; the staging for them
// is reserved before the capture. Without that reservation (issue 31)
// `mpirun -np 2 ddp_train --device cuda --zero 1 --cuda-graph
// --checkpoint-dir ck` threw at its first checkpoint, as this run does
// then on every rank. The replayed run ends where the eager one does, bit
// for bit (the same kernels and collectives in the same order). With shard
// groups (--zero-shard-size; 2 at 4 ranks) the layout and the reservation
// are the group's.
void check_captured_stage_one(int shard_size, Precision p) {
  SCOPED_TRACE(precision_name(p));
  MpiCommunicator mpi(MPI_COMM_WORLD, shard_size, p);
  const int n = mpi.shard_size();
  const test::SharedTempDir shared("mpi_zero_graphs");
  TrainConfig c = test::in_precision(stage_one_config(), p);
  c.zero_shard_size = n;
  const TrainTestData data = load_train_test(c.data, c.seed);
  const ShardLayout shards = zero_shard_layout(model_parameters(bind_model_to_data(c, data)).flat_count(), n);
  ASSERT_FALSE(shards.is_uniform()) << "a uniform layout needs no staging: the test would check nothing";

  CpuBackend cpu(1, p);
  Trainer eager(c, cpu, mpi, data);
  eager.prepare();
  eager.run();

  TrainConfig graphed = c;
  graphed.cuda_graph = true;
  graphed.checkpoint_dir = shared.path();
  graphed.checkpoint_every = 3;  // steps 3 and 6 and the end, all after the capture at step 2
  RecordingBackend graphs(DeviceKind::Cuda, /*can_capture=*/true, p);
  NcclStagingCommunicator comm(mpi, graphs);
  int bad = 0;
  try {
    Trainer t(graphed, graphs, comm, data);
    t.prepare();
    t.run();
    bad += state_differs(t.snapshot(), eager.snapshot());
  } catch (const Error& e) {  // the layouts are every rank's: all throw at the same call
    ADD_FAILURE() << e.what();
    ++bad;
  }
  EXPECT_EQ(failures_anywhere(bad), 0) << "the captured run failed or ended away from the eager one";
  EXPECT_GT(graphs.replays, static_cast<int>(c.steps) / 2) << "most steps should be replays";
  // The reservation: the FP32 gathers' staging, which covers the step's.
  EXPECT_EQ(comm.staging_count(), needed_staging_count(fp32_state_gather_layout(shards)));
  EXPECT_GT(comm.staging_count(), needed_staging_count(shards));
  MPI_Barrier(MPI_COMM_WORLD);  // rank 0 has written them
  for (const char* file : {"ckpt-step000000000003.safetensors", "ckpt-step000000000006.safetensors"})
    EXPECT_TRUE(std::filesystem::exists(shared.path() + "/" + file)) << file;
  if (mpi.rank() == 0)
    std::printf("--zero 1 --cuda-graph, %s, %d ranks in groups of %d: %d replays\n", precision_name(p),
                mpi.world_size(), n, graphs.replays);
}

TEST(ZeroGraphs, CapturedStageOneStepsCheckpointWithoutGrowingTheStaging) {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (world == 1) GTEST_SKIP() << "one rank's layout is uniform: no staging to reserve";
  for (int g = 2; g <= world; ++g) {
    if (world % g == 0)
      for (const Precision p : test::kBothPrecisions) check_captured_stage_one(g, p);
  }
}

}  // namespace
}  // namespace ddp
