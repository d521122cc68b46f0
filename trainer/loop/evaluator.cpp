// evaluator.cpp
#include "trainer/loop/evaluator.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/buffer.h"
#include "kernels/error.h"
#include "trainer/models/loss_head.h"

namespace ddp {

Evaluator::Evaluator(Backend& backend, const Dataset& test, int max_batch)
    : backend_(backend), test_(test), loader_(backend, test, max_batch), loss_mean_(backend, 1), correct_(backend, 1) {}

EvalResult evaluate(Backend& backend, Communicator& comm, Model& model, const Dataset& test, LossKind loss,
                    const lowp16* weights_lowp) {
  return Evaluator(backend, test, model.max_batch())
      .run(comm, model, loss, WeightTable::flat(weights_lowp, model.parameters()));
}

const EvalResult& Evaluator::run_at(int64_t step, Communicator& comm, Model& model, LossKind loss,
                                    const WeightTable& weights_lowp) {
  last_ = run(comm, model, loss, weights_lowp);
  last_step_ = step;
  return last_;
}

EvalResult Evaluator::run(Communicator& comm, Model& model, LossKind loss, const WeightTable& weights_lowp) {
  DDP_REQUIRE(loader_.max_batch() >= model.max_batch(), "Evaluator: the model's batch is larger than the loader's");
  const int rank = comm.rank(), world = comm.world_size();
  std::vector<uint32_t> shard;
  for (size_t i = rank; i < test_.count; i += world) shard.push_back(static_cast<uint32_t>(i));
  double loss_sum = 0.0, correct_sum = 0.0;
  for (size_t pos = 0; pos < shard.size(); pos += model.max_batch()) {
    const int rows = static_cast<int>(std::min<size_t>(model.max_batch(), shard.size() - pos));
    const DeviceBatch batch = loader_.load(shard.data() + pos, rows);
    // The outputs in blocks of rows (one block but for a model that holds
    // only a block: model.h), each block's mean loss weighed by its rows.
    model.forward_rows(batch, weights_lowp, [&](const ModelOutput& part, int first_row) {
      DeviceBatch targets = batch;
      if (targets.labels) targets.labels += first_row;
      if (targets.targets_fp32) targets.targets_fp32 += static_cast<size_t>(first_row) * part.width;
      loss_forward(backend_, loss, part, targets, loss_mean_.data(),
                   loss == LossKind::SoftmaxCrossEntropy ? correct_.data() : nullptr);
      // The next batch's gather and copy overlap this one's forward pass,
      // before the host waits for its results below.
      const size_t next = pos + model.max_batch();
      if (first_row == 0 && next < shard.size())
        loader_.prefetch(shard.data() + next,
                         static_cast<int>(std::min<size_t>(model.max_batch(), shard.size() - next)));
      float part_loss = 0.0f;
      if (loss == LossKind::SoftmaxCrossEntropy) {
        int32_t c = 0;
        backend_.copy_to_host(&c, correct_.data(), sizeof(c));
        correct_sum += c;
      }
      backend_.copy_to_host(&part_loss, loss_mean_.data(), sizeof(part_loss));
      loss_sum += static_cast<double>(part_loss) * part.rows;  // the mean was over the block's output rows
    });
  }
  EvalResult r;
  r.samples = static_cast<int64_t>(comm.allreduce_sum_host(static_cast<double>(shard.size())));
  // Loss and accuracy are means over predictions (a sample is one for the
  // MLP, one per position for a language model).
  const double predictions = static_cast<double>(std::max<int64_t>(r.samples, 1)) * model.outputs_per_sample();
  r.predictions = r.samples * model.outputs_per_sample();
  r.loss = comm.allreduce_sum_host(loss_sum) / predictions;
  r.correct = static_cast<int64_t>(comm.allreduce_sum_host(correct_sum));
  r.accuracy = loss == LossKind::SoftmaxCrossEntropy ? static_cast<double>(r.correct) / predictions
                                                     : std::numeric_limits<double>::quiet_NaN();
  return r;
}

}  // namespace ddp
