// captured_step.h: --cuda-graph. The training step recorded once by the
// backend (CUDA: a graph) and replayed for every step of the steady shape,
// with the batch copied into the recording's own input buffers first.
#pragma once

#include <cstdint>
#include <functional>

#include "comm/communicator.h"
#include "kernels/backend.h"
#include "kernels/buffer.h"
#include "trainer/data/batch_loader.h"
#include "trainer/data/dataset.h"
#include "trainer/optim/mixed_precision_optimizer.h"
#include "trainer/report/progress_reporter.h"
#include "trainer/config/train_config.h"

namespace ddp {

class CapturedStep {
 public:
  CapturedStep(const TrainConfig& cfg, Backend& backend, Communicator& comm, const Dataset& train,
               const MixedPrecisionOptimizer& optimizer, ProgressReporter& progress);

  // For --cuda-graph: throws ddp::Error when the backend or the transport
  // cannot capture; allocates the graph's input buffers.
  void enable();
  bool enabled() const { return graph_mode_; }

  // --cuda-graph: a step is replayed from a capture when its shapes are the
  // steady ones (one full micro-batch) and nothing in it needs the host (no
  // logged norm or clipping, no test hook), after one eager step of that
  // shape has made every allocation and GEMM plan. Everything per step that
  // a capture would freeze (scale, lr, skip, momentum start) is read from
  // the step state; the batch is uploaded before the replay.
  // `step_1based`: the step about to run.
  bool eligible(int64_t micro_batches, int64_t step_rows, bool log_step, int64_t step_1based) const {
    return graph_mode_ && shaped(micro_batches, step_rows, log_step, step_1based) && eager_full_steps_ > 0;
  }
  bool shaped(int64_t micro_batches, int64_t step_rows, bool log_step, int64_t step_1based) const;
  // Only a step of the captured shape and kind (one full micro-batch,
  // the optimizer without host reads, no test hook) makes the
  // allocations and plans the capture's kernels need: a log step's
  // optimizer takes another route. Called after each eager step.
  void count_eager_step(int64_t micro_batches, int64_t step_rows, bool log_step, int64_t step_1based) {
    if (shaped(micro_batches, step_rows, log_step, step_1based)) ++eager_full_steps_;
  }

  // Runs step `step_1based` from the recording, making it first (on the
  // first call) by calling `record_step` on the graph's input batch inside
  // a capture: the step's forward, backward, sums and update.
  void replay(const DeviceBatch& batch, int64_t step_1based,
              const std::function<void(const DeviceBatch& fixed)>& record_step);

  int64_t replays() const { return graph_replays_; }

 private:
  const TrainConfig& cfg_;
  Backend& backend_;
  Communicator& comm_;
  const Dataset& train_;
  const MixedPrecisionOptimizer& optimizer_;
  ProgressReporter& progress_;
  bool graph_mode_ = false;     // --cuda-graph on a backend and transport that can capture
  int capture_ = -1;            // the backend's recording of the step, once made
  struct GraphInput {           // the captured step's batch, copied in before each replay
    Buffer<lowp16> features;    // feature data (the MLP)
    Buffer<int32_t> token_ids;  // token data (the GPT): [rows, T]
    Buffer<int32_t> labels;     // [rows, labels per row]: 1, or T for token data
    Buffer<float> targets;
  } graph_input_;
  int64_t eager_full_steps_ = 0, graph_replays_ = 0;
};

}  // namespace ddp
