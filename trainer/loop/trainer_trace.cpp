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
    out.push_back({b.offset, b.count, ready == std::numeric_limits<int>::max() ? -1 : ready});
  }
  return out;
}
}  // namespace

void Trainer::Impl::wire_tracer() {
  TraceRunInfo info;
  info.device = backend.kind() == DeviceKind::Cuda ? "cuda" : "cpu";
  info.model = cfg.model;
  info.zero_stage = cfg.zero_stage;
  info.micro_batches = cfg.grad_accum;
  info.batch_per_rank = cfg.batch_size;
  info.global_batch = global_batch();
  info.parameters = model.parameters().parameter_count();
  for (int l = 0; l < model.layer_count(); ++l) info.layer_tensors.push_back(model.layer_tensors(l));
  info.buckets = trace_buckets(train_step.reducer(), model);
  check_trace_file(cfg, trace_path_for_rank(cfg.trace_path, comm.rank()));
  tracer = std::make_unique<StepTracer>(cfg.trace_path, TraceWindow{cfg.trace_first, cfg.trace_last}, backend, comm,
                                        std::move(info));
  train_step.set_tracer(tracer.get());
  Model::LayerObservers points;
  points.done = [this] { tracer->end_layers(); };
  points.started.before_forward = [this](int layer) { tracer->before_forward(layer); };
  points.started.before_backward = [this](int layer) { tracer->before_backward(layer); };
  model.set_layer_observers(points);
}

}  // namespace ddp
