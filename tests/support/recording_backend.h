// recording_backend.h (tests): a Backend that forwards every operation to a
// CpuBackend and
//   - counts the calls that make the host wait for the device
//     (copy_to_host, synchronize), so a test can check a training step
//     makes none;
//   - can claim to be a CUDA device (kind()), so the trainer treats host
//     reads as costly, as it does on a GPU;
//   - emulates CUDA graph capture: between begin_capture and end_capture each
//     operation is recorded (its by-value arguments copied) instead of run,
//     and a host wait or upload throws, as stream capture forbids; replay
//     runs the recording. A trainer whose captured step froze a per-step
//     value (a scale, an lr passed by value) gives different results from
//     the eager run under this backend;
//   - tells an observer (on_operation) of each queued operation as it is
//     issued, so a test can tell where in a step something else happened
//     (mpi_test_overlap.cpp: how much backward was left at a bucket start);
//   - queues a test transport's collectives with its own operations
//     (queue_operation), as a CUDA stream orders NCCL's with the kernels, so
//     a capture records them and a replay runs them
//     (nccl_staging_communicator.h).
#pragma once

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/cpu_backend.h"

namespace ddp {

class RecordingBackend final : public Backend, private OpForwarder {
 public:
  RecordingBackend(DeviceKind claimed_kind, bool can_capture, Precision precision = Precision::Fp16)
      : cpu_(1, precision), kind_(claimed_kind), can_capture_(can_capture) {
    set_op_rows({nullptr, nullptr, this});
  }

  int host_waits = 0;  // copy_to_host + synchronize calls
  int replays = 0;
  // Operations a capture recorded that had never run eagerly: on a GPU their
  // first run (a cuBLASLt plan, a buffer grown on demand) would happen inside
  // the capture, where it is not allowed.
  std::vector<std::string> first_seen_in_capture;
  // Called with the name of each queued operation (gemm_lowp, mse_backward...)
  // as it is issued, before it runs or is recorded.
  std::function<void(const char* operation)> on_operation;

  // Runs `op` now, or, inside a capture, records it for every replay, in
  // order with this backend's own operations.
  void queue_operation(const char* name, std::function<void()> op) { queue(name, std::move(op)); }

  DeviceKind kind() const override { return kind_; }
  Precision precision() const override { return cpu_.precision(); }
  std::string description() const override { return "recording(" + cpu_.description() + ")"; }

  void* allocate_bytes(size_t n) override {
    refuse_in_capture("allocate_bytes");
    return cpu_.allocate_bytes(n);
  }
  void free_bytes(void* p) noexcept override { cpu_.free_bytes(p); }
  void copy_to_device(void* d, const void* s, size_t n) override {
    refuse_in_capture("copy_to_device");
    cpu_.copy_to_device(d, s, n);
  }
  void copy_to_host(void* d, const void* s, size_t n) override {
    refuse_in_capture("copy_to_host");
    ++host_waits;
    cpu_.copy_to_host(d, s, n);
  }
  // Uploads happen between steps, outside any capture (the CPU slots copy at once).
  std::unique_ptr<UploadSlots> make_upload_slots(size_t slot_bytes) override {
    refuse_in_capture("make_upload_slots");
    return cpu_.make_upload_slots(slot_bytes);
  }
  void copy_on_device(void* d, const void* s, size_t n) override {
    queue("copy_on_device", [=] { cpu_.copy_on_device(d, s, n); });
  }
  void fill_zero(void* d, size_t n) override {
    queue("fill_zero", [=] { cpu_.fill_zero(d, n); });
  }
  void synchronize() override {
    refuse_in_capture("synchronize");
    ++host_waits;
  }

  bool supports_capture() const override { return can_capture_; }
  void begin_capture() override {
    if (!can_capture_ || capturing_) Backend::begin_capture();
    capturing_ = true;
    tapes_.emplace_back();
  }
  int end_capture() override {
    if (!capturing_) Backend::end_capture();
    capturing_ = false;
    return static_cast<int>(tapes_.size()) - 1;
  }
  void replay(int recording) override {
    refuse_in_capture("replay");
    for (const auto& op : tapes_.at(static_cast<size_t>(recording))) op();
    ++replays;
  }

 private:
  // The ops of kernels/ops/ (ops/op_dispatch.h): queued like the methods
  // above, run on the CpuBackend.
  void forward_op(const char* name, std::function<void(Backend&)> call) override {
    queue(name, [this, call = std::move(call)] { call(cpu_); });
  }
  void queue(const char* name, std::function<void()> op) {
    if (on_operation) on_operation(name);
    if (capturing_) {
      if (!run_eagerly_.count(name)) first_seen_in_capture.push_back(name);
      tapes_.back().push_back(std::move(op));
    } else {
      run_eagerly_.insert(name);
      op();
    }
  }
  void refuse_in_capture(const char* what) const {
    if (capturing_) throw Error(std::string(what) + " inside a step capture");
  }

  CpuBackend cpu_;
  DeviceKind kind_;
  bool can_capture_;
  bool capturing_ = false;
  std::vector<std::vector<std::function<void()>>> tapes_;
  std::set<std::string> run_eagerly_;
};

}  // namespace ddp
