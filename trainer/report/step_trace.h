// step_trace.h: --trace FILE: each rank's timeline of its training steps,
// as Chrome trace-event JSON (Perfetto, chrome://tracing) in FILE with the
// rank inserted (run.json -> run.rank0.json).
//
// tid 0 ("compute") holds each traced step, and inside it the batch upload,
// every layer's forward and backward (between the model's layer points,
// after a ZeRO-3 gather), the loss, the wait for the collectives and the
// optimizer; evaluations and checkpoint writes after a traced step too.
// tid 1 ("communication") holds every FP16 collective, tagged with its
// gradient bucket or layer (collective_trace.h). Compute times are stream
// marks (stream_marks.h: the host's clock on CPU, events on a GPU),
// resolved at log steps, so tracing adds no host synchronisation per step;
// the window's first step starts with a barrier, whose exit time every
// rank records (otherData.clock_sync_ts) for launch/merge_traces.py.
//
// The format is specified for the tools that read it
// (launch/scaling_model.py, launch/merge_traces.py) in the README's
// "Timelines" section; "format": "ddp_train trace 1" names its version.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/collective_trace.h"
#include "comm/communicator.h"
#include "kernels/backend.h"
#include "trainer/report/trace_window.h"

namespace ddp {

// What the trace says of the run, for its readers (otherData).
struct TraceRunInfo {
  std::string device, model;
  std::string precision = "fp16";          // --precision: the 16-bit buffers' format
  std::string grad_reduce_dtype = "fp16";  // --grad-reduce-dtype: the gradients' sums, the precision or fp32
  int zero_stage = 0;
  int64_t micro_batches = 1, batch_per_rank = 0, global_batch = 0;
  size_t parameters = 0;
  std::vector<std::vector<size_t>> layer_tensors;  // per layer, Model::layer_tensors
  struct Bucket {
    size_t offset = 0, elements = 0;
    int ready_after_layer = -1;  // the layer whose backward finishes it (backward runs from the last layer)
    size_t element_bytes = 2;    // of a summed element on the wire (4: --grad-reduce-dtype fp32)
  };
  std::vector<Bucket> buckets;  // in start order
};

class StepTracer {
 public:
  StepTracer(std::string path, TraceWindow window, Backend& backend, Communicator& comm, TraceRunInfo info);
  ~StepTracer();  // detaches from the communicator
  StepTracer(const StepTracer&) = delete;
  StepTracer& operator=(const StepTracer&) = delete;

  // The reducer's and the layer shards' tags go here (collective_trace.h).
  CollectiveTrace& collectives() { return collectives_; }

  // Before step `step` (1-based) is timed: if it opens the window, the
  // device is synchronised and the ranks pass a barrier (every rank calls
  // this at the same steps; the caller watches the barrier).
  void prepare_step(int64_t step);
  // Step `step` begins: inside the window it is traced (prepare_step first
  // if the caller did not). A step after the window traces nothing; the
  // file is written by finish(), outside any timed step.
  void begin_step(int64_t step);
  void end_step();
  // A span on the compute timeline (category "upload", "loss", "comm_wait",
  // "optimizer", "eval", "checkpoint"), closed by end_span; nothing outside
  // the window.
  void begin_span(const char* category);
  void end_span();
  // The model's layer points: closes the open layer span and opens the next.
  void before_forward(int layer) { layer_point("forward", layer); }
  void before_backward(int layer) { layer_point("backward", layer); }
  // The forward or backward pass returned: closes its last layer's span.
  void end_layers();
  // Gradient bucket `bucket` is ready and its collective starts: an instant
  // on the compute timeline (on every world size, one rank included: when
  // backward made the bucket ready, for the scaling model).
  void bucket_started(int bucket);

  // Resolves what was marked since the last flush (may wait for the
  // device and the collectives: at log steps).
  void flush();
  // Flushes and writes the file, once the window has begun (a run that
  // ends inside it included). A file that cannot be written is a warning:
  // the run it describes has finished.
  void finish();
  bool started() const { return started_; }
  bool written() const { return written_; }
  const TraceWindow& window() const { return window_; }

 private:
  struct Pending {
    const char* category;
    int layer;  // or, for "bucket_ready", the bucket
    int64_t step;
    size_t begin_mark, end_mark;
  };
  struct Event {
    std::string name;
    const char* category;
    int tid;
    double ts_us, dur_us;  // dur < 0: an instant ("ph": "i")
    int64_t step;
    int layer = -1, bucket = -1;
    const char* op = nullptr;
    size_t elements = 0, element_bytes = 2;
    double called_us = 0.0;
  };
  static constexpr size_t kNone = static_cast<size_t>(-1);
  void layer_point(const char* category, int layer);
  void set_origin();  // the device's zero (after a wait for it), for the marks and the transport
  void open(const char* category, int layer, size_t* slot);
  void close(size_t* slot);
  void write();

  std::string path_;
  TraceWindow window_;
  Backend& backend_;
  Communicator& comm_;
  TraceRunInfo info_;
  std::unique_ptr<StreamMarks> marks_;
  CollectiveTrace collectives_;
  double origin_us_ = 0.0;      // ts 0: this tracer's construction
  double clock_sync_us_ = 0.0;  // the window's barrier exit (trace clock)
  int64_t step_ = 0;            // the step being traced (0: none)
  int64_t first_traced_ = 0, last_traced_ = 0;
  bool started_ = false, written_ = false;
  bool in_step_ = false;  // between begin_step and end_step of a traced step (not evaluation's forwards)
  std::vector<Pending> pending_;
  size_t step_span_ = kNone, span_ = kNone, layer_span_ = kNone;  // indexes into pending_
  std::vector<Event> events_;
};

}  // namespace ddp
