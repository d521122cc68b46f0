// evaluator.h: test-set loss and accuracy. Each rank evaluates its strided
// shard (r, r+N, ... with no padding) and the sums are all-reduced, so every
// test sample is counted exactly once whatever the world size.
#pragma once

#include <cstdint>

#include "comm/communicator.h"
#include "kernels/buffer.h"
#include "trainer/data/batch_loader.h"
#include "trainer/models/model.h"
#include "trainer/config/train_config.h"

namespace ddp {

struct EvalResult {
  double loss = 0.0;      // mean over the test set
  double accuracy = 0.0;  // fraction in [0, 1]; NaN for regression
  int64_t correct = 0;
  int64_t samples = 0;
  int64_t predictions = 0;  // samples x outputs per sample (a language model predicts every position)
};

// Holds what an evaluation needs between calls (the test set rounded to
// FP16 once, upload slots, result buffers), so evaluating at every epoch's
// end allocates and converts nothing. `test` must outlive the Evaluator.
class Evaluator {
 public:
  Evaluator(Backend& backend, const Dataset& test, int max_batch);
  // weights_lowp: the model's weights per tensor (tensor_table.h).
  EvalResult run(Communicator& comm, Model& model, LossKind loss, const WeightTable& weights_lowp);
  // The loop's evaluation of the weights after `step`, kept as the last one
  // (the summary's figures; a run's end evaluates unless one ran at its step).
  const EvalResult& run_at(int64_t step, Communicator& comm, Model& model, LossKind loss,
                           const WeightTable& weights_lowp);
  const EvalResult& last() const { return last_; }
  bool ran_at(int64_t step) const { return last_step_ == step; }

 private:
  Backend& backend_;
  const Dataset& test_;
  BatchLoader loader_;
  Buffer<float> loss_mean_;
  Buffer<int32_t> correct_;
  EvalResult last_;
  int64_t last_step_ = -1;  // -1: none yet
};

// One evaluation with a fresh Evaluator, of the weights in one flat buffer
// (the registry's layout).
EvalResult evaluate(Backend& backend, Communicator& comm, Model& model, const Dataset& test, LossKind loss,
                    const lowp16* weights_lowp);

}  // namespace ddp
