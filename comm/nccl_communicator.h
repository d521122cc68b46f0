// nccl_communicator.h: the Communicator over NCCL, for GPU ranks (one GPU per
// rank, the CudaBackend's device; buffers are device memory). Rank 0 makes the
// ncclUniqueId and MPI_Bcast shares it; a world of one builds a one-rank NCCL
// communicator without MPI, so the NCCL path also runs on a single GPU.
//
// Streams: collectives run on `comm_stream`, a non-blocking stream this class
// owns. Each one is fenced with events in both directions (comm_stream waits
// for the work already queued on `compute_stream`; compute_stream waits for
// the collective), so callers see plain compute_stream order and the host
// never blocks. Host scalars (metrics) and the barrier go through MPI.
//
// Sharded collectives (comm/nccl_shard_collectives.cpp): ncclReduceScatter
// and ncclAllGather move the same count from every rank, so an uneven
// layout goes through the padded plan of comm/padded_collectives.h: a
// staging buffer of world + 1 slots, each the longest range rounded up to
// 64 elements, every range padded to a slot (the padding's sums are
// discarded), copied in and out on comm_stream. A uniform layout (world x
// longest == total) runs on the caller's buffers directly.
//
// Shard groups (a shard size below the world's): two more communicators
// split from the world's (ncclCommSplit), one per group of consecutive
// ranks and one per replica set; a reduce-scatter in the group is followed
// on comm_stream by an ncclAllReduce of the range across the replicas.
//
// Threads: the owner's thread makes every call; abort() alone may come from
// another (the collective watchdog). An AbortGate (comm/abort_gate.h) makes
// the two exclusive around each NCCL call, as NCCL requires of one
// communicator.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime.h>
#include <nccl.h>

#include "comm/abort_gate.h"
#include "comm/communicator.h"
#include "kernels/cuda/cuda_raii.h"

namespace ddp {

// ncclGetVersion's code as text, "2.28.9". NCCL 2.9 changed the encoding:
// major * 10000 + minor * 100 + patch since, major * 1000 + minor * 100 +
// patch before (2.8.4 is 2804).
std::string nccl_version_text(int version_code);
// NCCL collectives can be captured in a CUDA graph from NCCL 2.9 on.
constexpr int kFirstCapturableNcclVersion = 20900;
inline bool nccl_version_supports_capture(int version_code) { return version_code >= kFirstCapturableNcclVersion; }
// What capture_unsupported_reason() says for that version ("" when it can).
std::string nccl_capture_unsupported_reason(int version_code);

class NcclCommunicator final : public Communicator {
 public:
  // Collective over all `world_size` ranks (MPI_COMM_WORLD when world_size > 1,
  // which needs a build with MPI). The calling thread's current CUDA device is
  // the communicator's device: construct it after the CudaBackend whose
  // `compute_stream` is passed, on the same thread. Throws ddp::Error naming
  // the NCCL, MPI or CUDA call that failed.
  // `shard_size`: the ranks of a shard group (Communicator::shard_size), a
  // divisor of world_size; 0, the whole world. Its sums are ncclFloat16 or
  // ncclBfloat16 by `precision`.
  NcclCommunicator(int rank, int world_size, cudaStream_t compute_stream, int shard_size = 0,
                   Precision precision = Precision::Fp16);
  // ncclCommDestroy, or ncclCommAbort while an exception unwinds (destroy
  // waits for every peer; a failing rank must not). Never throws.
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  std::string name() const override { return name_; }  // "NCCL 2.28.9"
  Precision precision() const override { return precision_; }
  int shard_rank() const override { return shard_rank_; }
  int shard_size() const override { return shard_size_; }
  // MPI_Allgather of the world's values, summed over the group in rank order.
  double allreduce_sum_host_shard_group(double value) override;

  // 16-bit sum in place on device memory (ncclFloat16 or ncclBfloat16, ncclSum).
  void allreduce_sum_lowp(lowp16* data, size_t count) override;
  // Device bytes in place (ncclUint8).
  void broadcast_bytes(void* data, size_t size_bytes, int root) override;
  // MPI_Allreduce of a host double when world > 1; the identity otherwise.
  double allreduce_sum_host(double value) override;
  // MPI_Allreduce (MPI_MAX) of a host integer when world > 1; the identity otherwise.
  int64_t allreduce_max_host(int64_t value) override;
  // Device int32s in place (ncclInt32, ncclMax), fenced like a collective:
  // no host wait. Not timed (a flag, not traffic).
  void allreduce_max_int32(int32_t* data, size_t count) override;
  // Device memory. start_ queues on comm_stream like start_allreduce_sum_lowp;
  // the plain ones add wait_allreduces(). The staging buffer grows by the
  // rule of kernels/graph_safe_growth.h: a call that needs more of it while
  // capturing, or after a capture once it exists (a graph holds its
  // address), throws. The captured step's own layouts are sized by its
  // eager run; wider ones used only outside it (the FP32-state gathers of
  // checkpoints) must be reserved before the first capture.
  void reduce_scatter_sum_lowp(const lowp16* send, lowp16* recv, const ShardLayout& layout) override;
  void allgather_lowp(const lowp16* mine, lowp16* full, const ShardLayout& layout) override;
  void start_reduce_scatter_sum_lowp(const lowp16* send, lowp16* recv, const ShardLayout& layout) override;
  void start_allgather_lowp(const lowp16* mine, lowp16* full, const ShardLayout& layout) override;
  // Grows the staging to needed_staging_count(layout) (padded_collectives.h)
  // now; by the same rule, so before any capture.
  void reserve_shard_staging(const ShardLayout& layout) override;
  // Waits for comm_stream, then MPI_Barrier when world > 1.
  void barrier() override;
  // Queues the sum on comm_stream after the compute stream's work so far;
  // the compute stream does not wait for it until wait_allreduces().
  void start_allreduce_sum_lowp(lowp16* data, size_t count) override;
  // ncclFloat32, otherwise as the 16-bit ones.
  void start_allreduce_sum_fp32(float* data, size_t count) override;
  void start_reduce_scatter_sum_fp32(const float* send, float* recv, const ShardLayout& layout) override;
  void wait_allreduces() override;
  CollectiveMark mark_started() override;
  void wait_until(CollectiveMark mark) override;
  // From timing events: busy around each collective on comm_stream, exposed
  // around the compute stream's wait. Waits for the last of them.
  AllreduceTimes take_allreduce_times() override;
  // The trace records' times from their events (waits for the last).
  void resolve_trace_times() override;
  // NCCL collectives on a capturing stream become graph nodes (NCCL >= 2.9,
  // the linked library's version, not the header's); the cross-stream event
  // waits become graph edges.
  bool supports_capture() const override { return nccl_version_supports_capture(version_code_); }
  std::string capture_unsupported_reason() const override { return nccl_capture_unsupported_reason(version_code_); }
  void set_capturing(bool on) override {
    capturing_ = on;
    if (on) captured_ = true;
  }

  // For callers that overlap several collectives with compute (gradient
  // buckets) and order them with their own events.
  cudaStream_t comm_stream() const { return comm_stream_.get(); }

  // ncclCommAbort: ends in-flight collectives and frees the communicator, for
  // a watchdog thread that sees a peer hang. Safe to call more than once and
  // from another thread; later collectives throw. Never throws, and returns
  // within about `gate_wait` plus NCCL's own abort: when the owner's thread
  // is inside an NCCL call for longer than that (a blocking communicator's
  // call can wait for a dead peer), or once a CUDA graph has captured our
  // collectives (NCCL's abort would wait for those graphs), it only marks
  // the communicator aborted and leaves it to the end of the process, which
  // the caller brings about next (MPI_Abort).
  static constexpr std::chrono::milliseconds kAbortGateWait{1000};
  void abort(std::chrono::milliseconds gate_wait = kAbortGateWait) noexcept;

 private:
  void comm_waits_for_compute();
  void compute_waits_for_comm();
  void close_comm() noexcept;  // the destructor's ncclCommDestroy / ncclCommAbort
  // The shard group's and the replicas' communicators (ncclCommSplit).
  void split_shard_groups();
  // ncclCommAbort of every communicator this object holds (a constructor
  // that throws after the first, the destructor unwinding, abort()).
  void abort_comms() noexcept;
  // The communicator of this rank's shard group: the world's without groups.
  ncclComm_t shard_comm() const { return shard_comm_ != nullptr ? shard_comm_ : comm_; }
  // Around every timed collective on comm_stream, inside the gate: fences
  // comm_stream after compute_stream, opens a busy record (none while
  // capturing) and, when traced, a trace record with its events;
  // end_collective records their ends and marks the collectives pending
  // for wait_allreduces.
  struct CollectiveTiming {
    cudaEvent_t busy_end = nullptr;     // null: not timed
    CollectiveRecord* trace = nullptr;  // null: not traced
  };
  CollectiveTiming begin_collective(const char* op, size_t elements, size_t element_bytes = 2);
  void end_collective(const CollectiveTiming& timing);
  // At least `count` 16-bit elements of staging, growing it before the gate
  // (growth waits for comm_stream: the old buffer may be in use).
  lowp16* staging_lowp(size_t count);

  int rank_ = 0, world_size_ = 1;
  int shard_rank_ = 0, shard_size_ = 1;
  int version_code_ = 0;  // ncclGetVersion
  std::string name_;
  Precision precision_ = Precision::Fp16;
  ncclDataType_t lowp_type_ = ncclFloat16;  // precision_'s NCCL type
  cudaStream_t compute_stream_ = nullptr;   // the backend's; not owned
  // The stream and events outlive comm_: the destructor body releases comm_
  // before any member is destroyed.
  UniqueCudaStream comm_stream_;
  UniqueCudaEvent compute_ready_;  // recorded on compute_stream, waited on by comm_stream
  UniqueCudaEvent comm_done_;      // recorded on comm_stream, waited on by compute_stream
  struct TimingPool {
    std::vector<std::pair<UniqueCudaEvent, UniqueCudaEvent>> events;
    size_t used = 0;  // pairs recorded since the last take_allreduce_times()
  };
  std::pair<cudaEvent_t, cudaEvent_t> next_timing_pair(TimingPool& pool);
  static double drain_seconds(TimingPool& pool);
  TimingPool busy_events_, exposed_events_;
  TimingPool trace_events_;          // --trace's, reused after resolve_trace_times()
  bool allreduces_pending_ = false;  // collectives started since the last wait_allreduces()
  // mark_started's events on comm_stream, reused after wait_allreduces().
  // A mark is its generation (wait_allreduces() calls so far) above 32
  // bits and its event's index + 1 below (0: nothing pending); a mark of
  // an earlier generation was passed by that wait.
  std::vector<UniqueCudaEvent> mark_events_;
  size_t marks_used_ = 0;
  uint64_t mark_generation_ = 0;
  UniqueDeviceMemory staging_;         // the padded ranges of uneven layouts
  size_t staging_count_ = 0;           // 16-bit elements in staging_
  bool capturing_ = false;             // inside a step capture: no timing events
  std::atomic<bool> captured_{false};  // some CUDA graph captured our collectives (see abort()); read by the watchdog
  // Held from the liveness check to the end of each NCCL call on comm_, and
  // by abort() and the destructor around releasing it.
  AbortGate gate_{"NCCL communicator"};
  ncclComm_t comm_ = nullptr;
  ncclComm_t shard_comm_ = nullptr;    // this rank's shard group; null without groups
  ncclComm_t replica_comm_ = nullptr;  // the ranks of this place in every group; null without groups
};

}  // namespace ddp
