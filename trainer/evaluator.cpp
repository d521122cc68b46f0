// evaluator.cpp
#include "trainer/evaluator.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/buffer.h"

namespace ddp {

EvalResult evaluate(Backend& backend, Communicator& comm, MlpModel& model, const Dataset& test, LossKind loss,
                    const half16* weights_fp16) {
  const int rank = comm.rank(), world = comm.world_size();
  std::vector<uint32_t> shard;
  for (size_t i = rank; i < test.count; i += world) shard.push_back(static_cast<uint32_t>(i));
  BatchLoader loader(backend, test, model.max_batch());
  Buffer<float> loss_mean(backend, 1);
  Buffer<int32_t> correct(backend, 1);
  double loss_sum = 0.0, correct_sum = 0.0;
  for (size_t pos = 0; pos < shard.size(); pos += model.max_batch()) {
    const int rows = static_cast<int>(std::min<size_t>(model.max_batch(), shard.size() - pos));
    const DeviceBatch batch = loader.load(shard.data() + pos, rows);
    const half16* out = model.forward(batch.features_fp16, rows, weights_fp16);
    if (loss == LossKind::SoftmaxCrossEntropy)
      backend.softmax_xent_forward(out, batch.labels, rows, model.output_width(), loss_mean.data(), correct.data());
    else
      backend.mse_forward(out, batch.targets_fp32, rows, model.output_width(), loss_mean.data());
    // The next batch's gather and copy overlap this one's forward pass,
    // before the host waits for its results below.
    const size_t next = pos + model.max_batch();
    if (next < shard.size())
      loader.prefetch(shard.data() + next, static_cast<int>(std::min<size_t>(model.max_batch(), shard.size() - next)));
    float batch_loss = 0.0f;
    if (loss == LossKind::SoftmaxCrossEntropy) {
      int32_t c = 0;
      backend.copy_to_host(&c, correct.data(), sizeof(c));
      correct_sum += c;
    }
    backend.copy_to_host(&batch_loss, loss_mean.data(), sizeof(batch_loss));
    loss_sum += static_cast<double>(batch_loss) * rows;
  }
  EvalResult r;
  r.samples = static_cast<int64_t>(comm.allreduce_sum_host(static_cast<double>(shard.size())));
  r.loss = comm.allreduce_sum_host(loss_sum) / std::max<int64_t>(r.samples, 1);
  r.correct = static_cast<int64_t>(comm.allreduce_sum_host(correct_sum));
  r.accuracy = loss == LossKind::SoftmaxCrossEntropy ? static_cast<double>(r.correct) / std::max<int64_t>(r.samples, 1)
                                                     : std::numeric_limits<double>::quiet_NaN();
  return r;
}

}  // namespace ddp
