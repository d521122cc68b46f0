// mpi_test_zero_update_gathers.cpp: stages 1 and 2 all-gather the updated
// FP16 weights chunk by chunk after the optimizer step and each layer's
// next forward waits for its own chunks only (layer_shards.h), on CPU ranks
// (CTest runs this binary with 2, 3 and 4 ranks), SGD and AdamW, with and
// without accumulation:
//   - the communicator sees, after every step, one mark per chunk (more
//     than one: small buckets), then one wait per layer of each forward,
//     and one wait of the whole before the end-of-run evaluation reads the
//     weights;
//   - the FP16 weights end the same bits on every rank, and the masters
//     within the tolerance mpi_test_zero.cpp holds stage 0 to (the gathers
//     move the same values as the one all-gather did).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "mpi/mpi_gpt_config.h"
#include "mpi/mpi_logging_communicator.h"
#include "mpi/mpi_test_support.h"
#include "mpi/mpi_trained_weights.h"
#include "support/lowp_format.h"
#include "support/precision_config.h"
#include "support/temp_dir.h"

namespace ddp {
namespace {
using test::failures_anywhere;

// The log split at its marks: the number of marks in each run of marks,
// and the number of waits after each such run.
struct Runs {
  std::vector<size_t> marks, waits;
};
Runs runs_of(const std::string& log) {
  Runs r;
  for (size_t i = 0; i < log.size();) {
    size_t m = 0, w = 0;
    for (; i < log.size() && log[i] == 'M'; ++i) ++m;
    for (; i < log.size() && log[i] == 'W'; ++i) ++w;
    r.marks.push_back(m);
    r.waits.push_back(w);
  }
  return r;
}

TEST(ZeroUpdateGathers, EachLayerWaitsForItsChunksOfTheUpdatedWeights) {
  const test::TempDir own("mpi_zero_update_gathers");
  TrainConfig base = test::tiny_gpt_config(own.path());
  base.steps = 3;
  base.bucket_mb = 0.02;  // ~10k FP16 elements a bucket: several chunks
  base.first_bucket_mb = 0.01;
  const TrainTestData data = load_train_test(base.data, base.seed);
  const size_t layers = static_cast<size_t>(base.gpt.n_layer) + 2;
  for (const Precision p : test::kBothPrecisions)
    for (const int stage : {1, 2})
      for (const bool adamw : {false, true})
        for (const int accum : {1, 2}) {
          if (stage == 2 && accum == 2) continue;  // stage 2 keeps whole gradients then: as stage 1
          TrainConfig c = test::in_precision(base, p);
          c.zero_stage = stage;
          c.grad_accum = accum;
          c.optimizer = adamw ? OptimizerKind::AdamW : OptimizerKind::Sgd;
          c.lr = adamw ? 3e-3 : 0.1;
          const std::string what = std::string(precision_name(p)) + " --zero " + std::to_string(stage) +
                                   (adamw ? " AdamW" : " SGD") + " --grad-accum " + std::to_string(accum);
          test::LoggingCommunicator comm(0, p);
          const test::TrainedWeights got = test::train_weights(c, comm, data);
          const Runs runs = runs_of(comm.log);
          // Steps 1-3 each end in a run of marks; the forward of steps 2 and 3
          // waits layer by layer, the end-of-run evaluation once.
          bool shape = runs.marks.size() == 3 && runs.marks[0] > 1;
          for (size_t k = 0; shape && k < 3; ++k) {
            shape = runs.marks[k] == runs.marks[0];
            const size_t want_waits = k < 2 ? layers * static_cast<size_t>(accum) : 1;
            shape = shape && runs.waits[k] == want_waits;
          }
          EXPECT_EQ(failures_anywhere(!shape), 0) << what << ": marks and waits " << comm.log;
          EXPECT_EQ(failures_anywhere(!test::same_as_rank0(got.weights)), 0) << what << ": ranks' FP16 weights differ";
          c.zero_stage = 0;
          test::LoggingCommunicator plain_comm(0, p);
          const test::TrainedWeights plain = test::train_weights(c, plain_comm, data);
          double diff = 0, norm = 0;
          for (size_t i = 0; i < plain.master.size() && i < got.master.size(); ++i) {
            diff += std::pow(static_cast<double>(got.master[i]) - plain.master[i], 2);
            norm += std::pow(static_cast<double>(plain.master[i]), 2);
          }
          const double bound = p == Precision::Bf16 ? 8e-3 : 1e-3;  // BF16's sums round 8x coarser
          EXPECT_EQ(failures_anywhere(!(std::sqrt(diff) <= bound * std::sqrt(norm))), 0)
              << what << ": " << std::sqrt(diff / norm) << " from --zero 0";
          EXPECT_TRUE(plain_comm.log.empty()) << "stage 0 gathers nothing: " << plain_comm.log;
        }
}

}  // namespace
}  // namespace ddp
