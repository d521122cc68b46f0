// mpi_test_dropped_logits.cpp: --classifier-logits drop on CPU ranks (CTest
// runs this binary with 2, 3 and 4 ranks), at --zero 0, 1, 2 and 3, with
// one micro-batch and two accumulated (a global batch of 96 windows: 768,
// 512 or 384 rows per rank and micro-batch, cut into chunks of 144 and
// more, and half that accumulated): SGD's master weights within 1e-4 of --classifier-logits
// keep's in norm on every rank (drop's d_wte is an FP32 sum in another
// order: a last-bit difference, where a chunk's share lost or doubled
// moves the weights by far more), and the FP16 weights the same bits on
// every rank (stage 3 gathers wte before the head's forward, where the
// dropped head also runs its backward).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
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

namespace ddp {
namespace {
using test::failures_anywhere;

TEST(DroppedLogits, TrainsAsKeepAtEveryZeroStage) {
  MpiCommunicator comm;
  const test::TempDir own("mpi_dropped_logits");  // each rank its own text file
  TrainConfig c = test::tiny_gpt_config(own.path());
  c.gpt.classifier_chunk = 16;  // pieces of 144 rows (at least 2^20 multiply-adds), the last up to 271
  c.global_batch = 96;
  c.steps = 4;
  const TrainTestData data = load_train_test(c.data, c.seed);
  for (const int accum : {1, 2})
    for (const int stage : {0, 1, 2, 3}) {
      c.grad_accum = accum;
      c.zero_stage = stage;
      c.gpt.classifier_logits = ClassifierLogits::Keep;
      const test::TrainedWeights keep = test::train_weights(c, comm, data);
      c.gpt.classifier_logits = ClassifierLogits::Drop;
      const test::TrainedWeights drop = test::train_weights(c, comm, data);
      double diff_squares = 0, keep_squares = 0;
      for (size_t i = 0; i < keep.master.size() && i < drop.master.size(); ++i) {
        diff_squares += std::pow(static_cast<double>(drop.master[i]) - keep.master[i], 2);
        keep_squares += std::pow(static_cast<double>(keep.master[i]), 2);
      }
      const bool close =
          drop.master.size() == keep.master.size() && std::sqrt(diff_squares) <= 1e-4 * std::sqrt(keep_squares);
      EXPECT_EQ(failures_anywhere(!close), 0)
          << "--zero " << stage << " --grad-accum " << accum << ": drop's weights are "
          << std::sqrt(diff_squares / keep_squares) << " from keep's on some rank";
      EXPECT_EQ(failures_anywhere(!test::same_as_rank0(drop.weights)), 0)
          << "--zero " << stage << " --grad-accum " << accum << ": the FP16 weights differ between ranks";
    }
}

}  // namespace
}  // namespace ddp
