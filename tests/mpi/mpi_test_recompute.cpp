// mpi_test_recompute.cpp: --recompute light and block on CPU ranks (CTest
// runs this binary with 2, 3 and 4 ranks), at --zero 0, 1, 2 and 3 with
// two accumulated micro-batches: every level's master weights and FP16
// weights the same bits as --recompute none's at that stage, on every rank
// (stage 3 gathers each block's weights before its backward, where the
// recompute runs, as before its forward).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstring>
#include <string>
#include <vector>

#include "comm/mpi_communicator.h"
#include "kernels/cpu/cpu_backend.h"
#include "mpi/mpi_gpt_config.h"
#include "mpi/mpi_test_support.h"
#include "mpi/mpi_trained_weights.h"
#include "support/temp_dir.h"
#include "trainer/loop/trainer.h"
#include "trainer/models/layers/recompute.h"

namespace ddp {
namespace {
using test::failures_anywhere;

using test::same_bits;
TEST(Recompute, EveryLevelTrainsNonesBitsAtEveryZeroStage) {
  MpiCommunicator comm;
  const test::TempDir own("mpi_recompute");  // each rank its own text file
  TrainConfig c = test::tiny_gpt_config(own.path());
  c.optimizer = OptimizerKind::AdamW;
  c.lr = 3e-3;
  c.grad_accum = 2;  // 24 windows: 6, 4 or 3 per rank and micro-batch at 2, 3, 4 ranks
  c.steps = 4;
  const TrainTestData data = load_train_test(c.data, c.seed);
  for (const int stage : {0, 1, 2, 3}) {
    c.zero_stage = stage;
    c.gpt.recompute = Recompute::None;
    const test::TrainedWeights want = test::train_weights(c, comm, data);
    for (const Recompute level : {Recompute::Light, Recompute::Block}) {
      c.gpt.recompute = level;
      const test::TrainedWeights got = test::train_weights(c, comm, data);
      const int bad = !same_bits(got.master, want.master) + !same_bits(got.weights, want.weights);
      EXPECT_EQ(failures_anywhere(bad), 0) << "--zero " << stage << " --recompute " << recompute_name(level)
                                           << ": the weights differ from --recompute none's on some rank";
    }
  }
}

}  // namespace
}  // namespace ddp
