// mpi_test_zero_prefetch.cpp: --zero 3 with --zero-prefetch 0, 1 and 3 on
// CPU ranks (CTest runs this binary with 2, 3 and 4 ranks):
//   - every depth trains the same bits (master and FP16 weights, on every
//     rank), SGD and AdamW, with and without accumulation: the gathers move
//     the same values whenever they run;
//   - the layer hooks start the next N gathers before they wait for their
//     own: the communicator sees, per pass of E gathers, N + 1 marks before
//     the first wait and one mark before each later wait while any are
//     left (depth 0: a mark and its wait, E times);
//   - the gather slots held grow by one slot per depth past 1.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstring>
#include <string>
#include <vector>

#include "comm/mpi_communicator.h"
#include "kernels/cpu/cpu_backend.h"
#include "mpi/mpi_gpt_config.h"
#include "mpi/mpi_logging_communicator.h"
#include "mpi/mpi_test_support.h"
#include "mpi/mpi_trained_weights.h"
#include "support/lowp_format.h"
#include "support/precision_config.h"
#include "support/temp_dir.h"
#include "trainer/loop/trainer.h"

namespace ddp {
namespace {
using test::failures_anywhere;

using test::same_bits;

struct Trained : test::TrainedWeights {
  std::string log;  // the layer hooks' marks and waits
};

Trained train(const TrainConfig& c, const TrainTestData& data) {
  test::LoggingCommunicator comm(0, c.precision);
  Trained r;
  static_cast<test::TrainedWeights&>(r) = test::train_weights(c, comm, data);
  r.log = comm.log;
  return r;
}

// One pass's marks and waits at depth N over E gathers (layer_shards.h).
std::string expected_pass(size_t gathers, size_t depth) {
  std::string pass;
  size_t started = 0;
  for (size_t entry = 0; entry < gathers; ++entry) {
    while (started < std::min(gathers, entry + 1 + depth)) {
      pass += 'M';
      ++started;
    }
    pass += 'W';
  }
  return pass;
}

TEST(ZeroPrefetch, EveryDepthTrainsTheSameBitsAndStartsGathersAhead) {
  const test::TempDir own("mpi_zero_prefetch");  // each rank its own text file
  TrainConfig c = test::tiny_gpt_config(own.path());
  c.zero_stage = 3;
  c.steps = 3;
  const TrainTestData data = load_train_test(c.data, c.seed);
  const size_t gathers = 2 * (c.gpt.n_layer + 2);  // the embedding, the blocks, ln_f and the head; both ways
  for (const Precision p : test::kBothPrecisions)
    for (const bool adamw : {false, true})
      for (const int accum : {1, 2}) {
        c = test::in_precision(c, p);
        c.optimizer = adamw ? OptimizerKind::AdamW : OptimizerKind::Sgd;
        c.lr = adamw ? 3e-3 : 0.1;
        c.grad_accum = accum;
        const std::string what =
            std::string(precision_name(p)) + (adamw ? " AdamW" : " SGD") + " --grad-accum " + std::to_string(accum);
        c.zero_prefetch = 0;
        const Trained none = train(c, data);
        size_t slot_bytes = 0;
        for (const int depth : {1, 3}) {
          c.zero_prefetch = depth;
          const Trained got = train(c, data);
          const int bad = !same_bits(got.master, none.master) + !same_bits(got.weights, none.weights);
          EXPECT_EQ(failures_anywhere(bad), 0) << what << " --zero-prefetch " << depth << ": differs from depth 0";
          // Every pass (a micro-batch's forward and backward) alike, and no
          // other mark or wait between them.
          const std::string pass = expected_pass(gathers, static_cast<size_t>(depth));
          std::string passes;
          while (passes.size() < got.log.size()) passes += pass;
          EXPECT_EQ(failures_anywhere(got.log != passes), 0)
              << what << " --zero-prefetch " << depth << ": marks and waits " << got.log << ", passes of " << pass;
          if (depth == 1) slot_bytes = got.zero_buffers - none.zero_buffers;
          if (depth == 3) {
            EXPECT_EQ(failures_anywhere(got.zero_buffers <= none.zero_buffers), 0) << what;
          }
        }
        EXPECT_EQ(slot_bytes, 0u) << "depth 1 holds depth 0's two slots";
        const std::string pass = expected_pass(gathers, 0);
        EXPECT_EQ(failures_anywhere(none.log.size() % pass.size() != 0 || none.log.substr(0, pass.size()) != pass), 0)
            << what << ": depth 0's marks and waits " << none.log;
      }
}

}  // namespace
}  // namespace ddp
