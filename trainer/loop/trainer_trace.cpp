// trainer_trace.cpp: the Trainer's --trace part (trainer_impl.h): what the
// trace says of the run, and the tracer wired to the communicator, the step
// (its reducer and layer gathers) and the model's layer points.
#include <algorithm>
#include <limits>

#include "trainer/loop/run_outputs.h"
#include "trainer/loop/trainer_impl.h"

namespace ddp {
namespace {
// The layer whose backward finishes each bucket: backward runs from the
// last layer down, so a tensor's gradient is final after the lowest layer
// that touches it (the GPT's tied wte: layer 0), and a bucket once its
// last tensor is: the lowest of those.
std::vector<TraceRunInfo::Bucket> trace_buckets(const GradientReducer& reducer, const Model& model) {
  const size_t tensors = model.parameters().size();
  std::vector<int> final_after(tensors, std::numeric_limits<int>::max());
  for (int l = model.layer_count() - 1; l >= 0; --l)
    for (size_t t : model.layer_tensors(l)) final_after[t] = std::min(final_after[t], l);
  std::vector<TraceRunInfo::Bucket> out;
  for (const GradientBucket& b : reducer.buckets()) {
    int ready = std::numeric_limits<int>::max();
    for (size_t t = b.first_segment; t < b.end_segment; ++t) ready = std::min(ready, final_after[t]);
    out.push_back(
        {b.offset, b.count, ready == std::numeric_limits<int>::max() ? -1 : ready, reducer.wire_element_bytes()});
  }
  return out;
}
}  // namespace

void Trainer::Impl::wire_tracer() {
  TraceRunInfo info;
  info.device = backend_.kind() == DeviceKind::Cuda ? "cuda" : "cpu";
  info.precision = precision_name(backend_.precision());
  info.grad_reduce_dtype = cfg_.grad_reduce_fp32 ? "fp32" : info.precision;
  info.model = cfg_.model;
  info.zero_stage = cfg_.zero_stage;
  info.micro_batches = cfg_.grad_accum;
  info.batch_per_rank = cfg_.batch_size;
  info.global_batch = global_batch();
  info.parameters = model_->parameters().parameter_count();
  for (int l = 0; l < model_->layer_count(); ++l) info.layer_tensors.push_back(model_->layer_tensors(l));
  info.buckets = trace_buckets(train_step_.reducer(), *model_);
  check_trace_file(cfg_, trace_path_for_rank(cfg_.trace_path, comm_.rank()));
  observers_.tracer = std::make_unique<StepTracer>(cfg_.trace_path, TraceWindow{cfg_.trace_first, cfg_.trace_last},
                                                   backend_, comm_, std::move(info));
  train_step_.set_tracer(observers_.tracer.get());
  Model::LayerObservers points;
  points.done = [this] { observers_.tracer->end_layers(); };
  points.started.before_forward = [this](int layer) { observers_.tracer->before_forward(layer); };
  points.started.before_backward = [this](int layer) { observers_.tracer->before_backward(layer); };
  model_->set_layer_observers(points);
}

}  // namespace ddp
