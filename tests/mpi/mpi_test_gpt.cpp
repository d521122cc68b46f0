// mpi_test_gpt.cpp: the GPT trained data-parallel on CPU ranks (CTest runs
// this binary with 2, 3 and 4 ranks): N ranks at B/N windows each against
// one rank at B, and every rank's masters bitwise identical to rank 0's
// after every step, as for the MLP (mpi_test_data_parallel.cpp).
#include <gtest/gtest.h>
#include <mpi.h>

#include <fstream>
#include <random>
#include <string>

#include "comm/mpi_communicator.h"
#include "kernels/cpu/cpu_backend.h"
#include "mpi/mpi_gpt_config.h"
#include "mpi/mpi_test_support.h"
#include "support/temp_dir.h"
#include "support/test_support.h"
#include "trainer/models/gpt/gpt_config.h"
#include "trainer/loop/trainer.h"

namespace ddp {
namespace {
using test::failures_anywhere;

// Tolerance: 0.5% of the update's L2 norm after 10 SGD steps, the MLP's
// bound. The runs differ by FP16 rounding only (per-rank FP16 gradients
// summed in FP16 against one GEMM over all rows); a wrong average (a sum
// not divided by N) changes the update by a factor N.
TEST(GptDataParallel, NRanksMatchOneRankAndStayIdentical) {
  MpiCommunicator comm;
  const test::TempDir own("mpi_gpt");
  const std::string& dir = own.path();
  TrainConfig c = test::tiny_gpt_config(dir);
  c.shuffle = false;
  c.steps = 10;
  CpuBackend cpu(1);
  const TrainTestData data = load_train_test(c.data, c.seed);

  TrainConfig stepwise = c;
  stepwise.stop_after_steps = 1;
  Trainer parallel(stepwise, cpu, comm, data);
  parallel.prepare();
  const std::vector<float> start = parallel.snapshot().master_weights_fp32;
  int bad = 0;
  for (int64_t step = 1; step <= c.steps; ++step) {
    const TrainSummary s = parallel.run();
    bad += s.final_step != step || s.skipped_steps != 0;
    std::vector<float> mine = parallel.snapshot().master_weights_fp32, root = mine;
    comm.broadcast_bytes(root.data(), root.size() * sizeof(float), 0);
    bad += root != mine;
  }
  EXPECT_EQ(failures_anywhere(bad), 0) << "ranks diverged, or a step was skipped";

  SingleProcessCommunicator alone;
  Trainer reference(c, cpu, alone, data);
  reference.prepare();
  reference.run();
  const double rel = test::relative_update_difference(parallel.snapshot().master_weights_fp32,
                                                      reference.snapshot().master_weights_fp32, start);
  EXPECT_EQ(failures_anywhere(!(rel < 5e-3)), 0)
      << "relative update difference " << rel << " with " << comm.world_size() << " ranks";
  if (comm.rank() == 0)
    std::printf("GPT: %d ranks against one, relative update difference %.3g\n", comm.world_size(), rel);
}

}  // namespace
}  // namespace ddp
