// captured_step.cpp: capture and replay of the training step (captured_step.h).
#include "trainer/loop/captured_step.h"

#include <string>

#include "kernels/error.h"
#include "trainer/loop/fault_hooks.h"

namespace ddp {

CapturedStep::CapturedStep(const TrainConfig& cfg, Backend& backend, Communicator& comm, const Dataset& train,
                           const MixedPrecisionOptimizer& optimizer, ProgressReporter& progress)
    : cfg_(cfg), backend_(backend), comm_(comm), train_(train), optimizer_(optimizer), progress_(progress) {}

void CapturedStep::enable() {
  if (!backend_.supports_capture())
    throw Error("--cuda-graph needs a CUDA device (this run uses " + backend_.description() + ")");
  if (!comm_.supports_capture()) throw Error("--cuda-graph: " + comm_.capture_unsupported_reason());
  graph_mode_ = true;
  const size_t rows = static_cast<size_t>(cfg_.batch_size);
  if (train_.is_token_data()) {
    graph_input_.token_ids = Buffer<int32_t>(backend_, rows * train_.tokens_per_sample);
    graph_input_.labels = Buffer<int32_t>(backend_, rows * train_.labels_per_sample());
    return;
  }
  graph_input_.features = Buffer<lowp16>(backend_, rows * train_.features);
  if (train_.is_classification())
    graph_input_.labels = Buffer<int32_t>(backend_, rows);
  else
    graph_input_.targets = Buffer<float>(backend_, rows * train_.target_dim);
}

bool CapturedStep::shaped(int64_t micro_batches, int64_t step_rows, bool log_step, int64_t step_1based) const {
  return micro_batches == 1 && step_rows == cfg_.batch_size && !optimizer_.needs_host(log_step) &&
         !overflow_injected_at(cfg_, cfg_.inject_overflow_rank, step_1based);
}

// The batch is copied (device to device, stream-ordered after its upload)
// into the graph's own input buffers, so there is one capture, made at
// the same step on every rank: NCCL requires a collective's capture to be
// uniform over the ranks, and which upload slot a rank's batch sits in is
// the loader's business.
void CapturedStep::replay(const DeviceBatch& batch, int64_t step_1based,
                          const std::function<void(const DeviceBatch& fixed)>& record_step) {
  const size_t rows = static_cast<size_t>(batch.rows);
  const size_t labels = rows * static_cast<size_t>(batch.labels_per_row);
  if (batch.features_lowp)
    backend_.copy_on_device(graph_input_.features.data(), batch.features_lowp, rows * train_.features * sizeof(lowp16));
  if (batch.token_ids)
    backend_.copy_on_device(graph_input_.token_ids.data(), batch.token_ids,
                            rows * train_.tokens_per_sample * sizeof(int32_t));
  if (batch.labels) backend_.copy_on_device(graph_input_.labels.data(), batch.labels, labels * sizeof(int32_t));
  if (batch.targets_fp32)
    backend_.copy_on_device(graph_input_.targets.data(), batch.targets_fp32, rows * train_.target_dim * sizeof(float));
  if (capture_ < 0) {
    DeviceBatch fixed;
    fixed.features_lowp = batch.features_lowp ? graph_input_.features.data() : nullptr;
    fixed.token_ids = batch.token_ids ? graph_input_.token_ids.data() : nullptr;
    fixed.labels = batch.labels ? graph_input_.labels.data() : nullptr;
    fixed.labels_per_row = batch.labels_per_row;
    fixed.targets_fp32 = batch.targets_fp32 ? graph_input_.targets.data() : nullptr;
    fixed.rows = batch.rows;
    backend_.begin_capture();
    comm_.set_capturing(true);
    try {
      record_step(fixed);
    } catch (...) {
      comm_.set_capturing(false);
      try {
        backend_.end_capture();
      } catch (...) {
      }  // leave capture mode; the first error is the one to report
      throw;
    }
    comm_.set_capturing(false);
    capture_ = backend_.end_capture();
    progress_.permanent("--cuda-graph: captured the training step at step " + std::to_string(step_1based) +
                        "; replaying it (log steps, short or accumulated steps run eagerly)");
  }
  backend_.replay(capture_);
  ++graph_replays_;
}

}  // namespace ddp
