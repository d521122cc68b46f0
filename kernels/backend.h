// backend.h: the numerics interface the model and trainer call. Two
// implementations: CpuBackend (always built; the reference) and CudaBackend.
//
// All pointers passed to a Backend are that backend's memory (device memory
// for CUDA). Operations are ordered on the backend's compute stream and may
// return before they finish; copy_to_host and synchronize wait. Shapes are
// row-major. Counts are element counts; byte counts say `_bytes`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "kernels/error.h"
#include "kernels/half.h"
#include "kernels/lowp_codec.h"
#include "kernels/step_status.h"
#include "kernels/stream_marks.h"
#include "kernels/upload_slots.h"

namespace ddp {

enum class DeviceKind { Cpu, Cuda };

class Backend;
class CpuBackend;
class CudaOpContext;  // kernels/cuda/cuda_op_context.h

// A backend that stands in front of another (the tests' RecordingBackend)
// takes each op's call instead of running it (ops/op_dispatch.h): `call`
// runs the op, its arguments frozen in it, on the backend it is given.
class OpForwarder {
 public:
  virtual void forward_op(const char* name, std::function<void(Backend&)> call) = 0;

 protected:
  ~OpForwarder() = default;
};

// A backend is its device, memory, copies, capture, precision and marks
// (below). The ops are not its methods: each is a unit of kernels/ops/
// whose entry point runs the row of the backend's device
// (ops/op_dispatch.h), so a new op changes nothing here.
class Backend {
 public:
  Backend() = default;
  // Not copied or moved: the op rows (below) point at the backend itself.
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;
  virtual ~Backend() = default;
  virtual DeviceKind kind() const = 0;
  virtual std::string description() const = 0;
  // The format of every 16-bit buffer (lowp16) the ops read and write,
  // fixed when the backend is made (lowp_codec.h): FP16 unless asked.
  virtual Precision precision() const { return Precision::Fp16; }

  // ---- memory -------------------------------------------------------------
  // The bytes Buffers (buffer.h: the trainer's and its models' device
  // memory) and a backend's own growing scratch (the CPU's FP32 widening of
  // GEMM operands) hold now and at most so far: the trainer's own
  // high-water mark, which the memory report and --bench quote. Not the
  // device's or the host's (a CUDA context, cuBLAS, NCCL's staging and
  // MPI's buffers are allocated outside Buffers).
  struct AllocationTally {
    size_t in_use_bytes = 0;
    size_t peak_bytes = 0;
  };
  AllocationTally allocations() const { return tally_; }
  void count_allocation(size_t size_bytes) {
    tally_.in_use_bytes += size_bytes;
    if (tally_.in_use_bytes > tally_.peak_bytes) tally_.peak_bytes = tally_.in_use_bytes;
  }
  void count_release(size_t size_bytes) noexcept { tally_.in_use_bytes -= size_bytes; }
  // The device's memory in use by every process, as its driver reports it
  // (CUDA: cudaMemGetInfo's total less free), beside the tally; 0 where no
  // device reports one (the CPU).
  virtual size_t device_used_bytes() const { return 0; }

  virtual void* allocate_bytes(size_t size_bytes) = 0;
  virtual void free_bytes(void* ptr) noexcept = 0;
  virtual void copy_to_device(void* dst, const void* src_host, size_t size_bytes) = 0;
  // Waits for all queued work before copying.
  virtual void copy_to_host(void* dst_host, const void* src, size_t size_bytes) = 0;
  virtual void copy_on_device(void* dst, const void* src, size_t size_bytes) = 0;
  virtual void fill_zero(void* dst, size_t size_bytes) = 0;
  virtual void synchronize() = 0;
  // Two fixed slots of slot_bytes each for copying batches to the device one
  // ahead of the compute stream (upload_slots.h): pinned staging and a copy
  // stream on CUDA, plain synchronous copies on the CPU.
  virtual std::unique_ptr<UploadSlots> make_upload_slots(size_t slot_bytes) = 0;

  // ---- step capture (CUDA graphs) ---------------------------------------------
  // Records the operations queued between begin_capture() and end_capture()
  // without running them, then replays the recording as often as asked
  // (CUDA: stream capture into a graph, one launch per replay). While
  // capturing nothing may wait for the device or hand over host data:
  // copy_to_device, copy_to_host and synchronize throw. A replay reads
  // memory as it is when it runs; arguments passed by value (shapes, a
  // ScalarArg value, SgdParams fields) are those of the capture, which is
  // why a captured step reads its scalars through the step state.
  virtual bool supports_capture() const { return false; }
  virtual void begin_capture() { throw Error(description() + " cannot capture a step"); }
  // Returns the recording's handle for replay().
  virtual int end_capture() { throw Error(description() + " cannot capture a step"); }
  virtual void replay(int /*recording*/) { throw Error(description() + " cannot replay a step"); }
  // Destroys every recording (their handles become invalid). A recording
  // that holds collectives keeps the communicator alive (NCCL waits for such
  // graphs when it is destroyed), so the owner of the recordings releases
  // them before the communicator goes. Waits for queued replays unless an
  // exception is unwinding (a replay may then wait for a peer that is gone;
  // the recordings are freed when their launches end).
  virtual void release_captures() noexcept {}

  // ---- tracing (--trace) ----------------------------------------------------
  // Marks on the compute stream (stream_marks.h); the default is the host's
  // clock, right for a backend whose calls return after their work.
  virtual std::unique_ptr<StreamMarks> make_stream_marks() { return std::make_unique<HostStreamMarks>(); }

  // ---- ops (kernels/ops/) ---------------------------------------------------
  // Where an op given this backend runs: exactly one is set, by the
  // implementation's constructor. cpu: the CPU rows on that CpuBackend;
  // cuda: the CUDA rows on that context (the CudaBackend's stream, precision
  // and scratch); forwarder: handed over (OpForwarder).
  struct OpRows {
    CpuBackend* cpu = nullptr;
    CudaOpContext* cuda = nullptr;
    OpForwarder* forwarder = nullptr;
  };
  const OpRows& op_rows() const { return op_rows_; }

 protected:
  void set_op_rows(const OpRows& rows) { op_rows_ = rows; }

 private:
  AllocationTally tally_;
  OpRows op_rows_;
};

}  // namespace ddp
