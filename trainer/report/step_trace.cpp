// step_trace.cpp
#include "trainer/report/step_trace.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "kernels/error.h"
#include "trainer/io/atomic_file.h"
#include "trainer/io/output_directory.h"

namespace ddp {
namespace {

std::string event_name(const char* category, int layer) {
  const std::string c = category;
  if (c == "forward" || c == "backward") return c + " layer " + std::to_string(layer);
  if (c == "comm_wait") return "wait for communication";
  if (c == "eval") return "evaluation";
  return c;
}
}  // namespace

StepTracer::StepTracer(std::string path, TraceWindow window, Backend& backend, Communicator& comm, TraceRunInfo info)
    : path_(trace_path_for_rank(path, comm.rank())),
      window_(window),
      backend_(backend),
      comm_(comm),
      info_(std::move(info)),
      marks_(backend.make_stream_marks()),
      origin_us_(trace_clock_us()) {
  // Refused at the start, not after the window: each rank's own directory.
  require_output_directory(path_, "--trace");
  comm_.set_trace(&collectives_);
}

StepTracer::~StepTracer() { comm_.set_trace(nullptr); }

void StepTracer::open(const char* category, int layer, size_t* slot) {
  pending_.push_back({category, layer, step_, marks_->mark(), kNone});
  *slot = pending_.size() - 1;
}

void StepTracer::close(size_t* slot) {
  if (*slot == kNone) return;
  pending_[*slot].end_mark = marks_->mark();
  *slot = kNone;
}

void StepTracer::prepare_step(int64_t step) {
  if (started_ || written_ || !window_.contains(step)) return;
  // The window opens on every rank at this step: the device idle, the
  // ranks leaving one barrier together, the device's zero set here.
  backend_.synchronize();
  comm_.barrier();
  set_origin();
  clock_sync_us_ = trace_clock_us();
  started_ = true;
  first_traced_ = step;
}

void StepTracer::set_origin() {
  marks_->set_origin();
  collectives_.device_origin = marks_->device_origin();
  collectives_.device_origin_us = marks_->device_origin_us();
}

void StepTracer::begin_step(int64_t step) {
  if (written_ || !window_.contains(step)) {
    step_ = 0;
    in_step_ = false;
    collectives_.active = false;
    collectives_.step = 0;
    return;
  }
  prepare_step(step);
  step_ = last_traced_ = step;
  in_step_ = true;
  collectives_.active = true;
  collectives_.step = step;
  open("step", -1, &step_span_);
}

void StepTracer::end_step() {
  if (step_ == 0) return;
  close(&layer_span_);
  close(&span_);
  close(&step_span_);
  in_step_ = false;
  collectives_.step = 0;  // what runs between steps (an evaluation) is not the step's
}

void StepTracer::begin_span(const char* category) {
  if (step_ == 0) return;
  close(&span_);
  open(category, -1, &span_);
}

void StepTracer::end_span() {
  if (step_ != 0) close(&span_);
}

void StepTracer::layer_point(const char* category, int layer) {
  if (!in_step_) return;
  close(&layer_span_);
  open(category, layer, &layer_span_);
}

void StepTracer::bucket_started(int bucket) {
  if (!in_step_) return;
  const size_t m = marks_->mark();
  pending_.push_back({"bucket_ready", bucket, step_, m, m});
}

void StepTracer::end_layers() {
  if (in_step_) close(&layer_span_);
}

void StepTracer::flush() {
  if (!started_ || written_) return;
  // Every record's times are written once the collectives are done.
  comm_.wait_allreduces();
  comm_.resolve_trace_times();
  for (const Pending& p : pending_) {
    if (p.end_mark == kNone) continue;  // still open (a flush inside a step): dropped
    Event e;
    e.category = p.category;
    e.tid = 0;
    e.step = p.step;
    e.layer = p.layer;
    e.name = p.category == std::string("step") ? "step " + std::to_string(p.step) : event_name(p.category, p.layer);
    e.ts_us = marks_->resolve_us(p.begin_mark) - origin_us_;
    e.dur_us = marks_->resolve_us(p.end_mark) - origin_us_ - e.ts_us;
    if (p.category == std::string("bucket_ready")) {
      e.layer = -1;
      e.bucket = p.layer;
      e.dur_us = -1.0;
      e.name = "bucket " + std::to_string(p.layer) + " ready";
    }
    events_.push_back(std::move(e));
  }
  pending_.clear();
  step_span_ = span_ = layer_span_ = kNone;
  marks_->clear();
  for (const std::shared_ptr<CollectiveRecord>& record : collectives_.records()) {
    const CollectiveRecord& r = *record;
    if (!(r.end_us >= r.begin_us)) continue;  // never ran (not possible after the wait; kept safe)
    Event e;
    e.category = "comm";
    e.tid = 1;
    e.op = r.op;
    e.elements = r.elements;
    e.element_bytes = r.element_bytes;
    e.bucket = r.bucket;
    e.layer = r.layer;
    e.name = std::string(r.op) + (r.bucket >= 0  ? " bucket " + std::to_string(r.bucket)
                                  : r.layer >= 0 ? " layer " + std::to_string(r.layer)
                                                 : std::string());
    e.ts_us = r.begin_us - origin_us_;
    e.dur_us = r.end_us - r.begin_us;
    e.called_us = r.called_us - origin_us_;
    e.step = r.step != 0 ? r.step : last_traced_;  // between steps: after the last traced one
    events_.push_back(std::move(e));
  }
  collectives_.clear();
  // A new zero for the device's times (it has just been waited for): CUDA
  // gives float milliseconds since an event, which blur over long windows.
  set_origin();
}

void StepTracer::finish() {
  if (written_ || !started_) return;
  flush();
  collectives_.active = false;
  step_ = 0;
  in_step_ = false;
  written_ = true;
  try {
    write();
  } catch (const Error& e) {
    std::fprintf(stderr, "ddp_train: warning: %s (the trace is lost; training was not affected)\n", e.what());
  }
  std::vector<Event>().swap(events_);
}

void StepTracer::write() {
  using nlohmann::json;
  const int rank = comm_.rank();
  json events = json::array();
  events.push_back({{"name", "process_name"},
                    {"ph", "M"},
                    {"pid", rank},
                    {"tid", 0},
                    {"args", {{"name", "rank " + std::to_string(rank)}}}});
  events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", rank}, {"tid", 0}, {"args", {{"name", "compute"}}}});
  events.push_back(
      {{"name", "thread_name"}, {"ph", "M"}, {"pid", rank}, {"tid", 1}, {"args", {{"name", "communication"}}}});
  for (const Event& e : events_) {
    json args = {{"step", e.step}};
    if (e.layer >= 0) args["layer"] = e.layer;
    if (e.bucket >= 0) args["bucket"] = e.bucket;
    if (e.op != nullptr) {
      args["op"] = e.op;
      args["elements"] = e.elements;
      args["bytes"] = e.elements * e.element_bytes;
      args["called_ts"] = e.called_us;
    }
    if (e.dur_us < 0.0) {  // an instant, on its thread
      events.push_back({{"name", e.name},
                        {"cat", e.category},
                        {"ph", "i"},
                        {"s", "t"},
                        {"ts", e.ts_us},
                        {"pid", rank},
                        {"tid", e.tid},
                        {"args", args}});
      continue;
    }
    events.push_back({{"name", e.name},
                      {"cat", e.category},
                      {"ph", "X"},
                      {"ts", e.ts_us},
                      {"dur", e.dur_us > 0.0 ? e.dur_us : 0.0},
                      {"pid", rank},
                      {"tid", e.tid},
                      {"args", args}});
  }
  json layers = json::array();
  for (size_t l = 0; l < info_.layer_tensors.size(); ++l)
    layers.push_back({{"layer", l}, {"tensors", info_.layer_tensors[l]}});
  json buckets = json::array();
  for (size_t b = 0; b < info_.buckets.size(); ++b) {
    const TraceRunInfo::Bucket& k = info_.buckets[b];
    buckets.push_back({{"bucket", b},
                       {"offset", k.offset},
                       {"elements", k.elements},
                       {"bytes", k.elements * k.element_bytes},
                       {"ready_after_layer", k.ready_after_layer}});
  }
  json other = {{"format", "ddp_train trace 1"},
                {"rank", rank},
                {"world_size", comm_.world_size()},
                {"device", info_.device},
                {"precision", info_.precision},
                {"grad_reduce_dtype", info_.grad_reduce_dtype},
                {"transport", comm_.name()},
                {"model", info_.model},
                {"zero_stage", info_.zero_stage},
                {"zero_shard_size", comm_.shard_size()},
                {"micro_batches", info_.micro_batches},
                {"batch_per_rank", info_.batch_per_rank},
                {"global_batch", info_.global_batch},
                {"parameters", info_.parameters},
                {"clock_sync_ts", clock_sync_us_ - origin_us_},
                {"steps_traced", {first_traced_, last_traced_}},
                {"layers", layers},
                {"buckets", buckets}};
  const json doc = {{"traceEvents", events}, {"displayTimeUnit", "ms"}, {"otherData", other}};
  const std::string text = doc.dump(1) + "\n";
  write_file_atomic(path_, std::vector<uint8_t>(text.begin(), text.end()), "trace");
}

}  // namespace ddp
