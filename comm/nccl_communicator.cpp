// nccl_communicator.cpp
#include "comm/nccl_communicator.h"

#include <cstdio>
#include <exception>

#include "comm/nccl_check.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_stream_marks.h"
#include "kernels/error.h"
#if defined(DDP_HAVE_MPI)
#include <mpi.h>

#include "comm/mpi_check.h"
#endif

namespace ddp {
namespace {

UniqueCudaEvent make_timing_event() {
  cudaEvent_t event = nullptr;
  DDP_CUDA_CHECK(cudaEventCreate(&event));
  return UniqueCudaEvent(event);
}

int linked_nccl_version() {
  int code = 0;
  DDP_NCCL_CHECK(ncclGetVersion(&code));
  return code;
}

// The non-throwing twin of DDP_NCCL_CHECK, for the destructor and abort().
void report_nccl_error(ncclResult_t rc, const char* call) noexcept {
  if (rc == ncclSuccess) return;
  const char* last = ncclGetLastError(nullptr);
  const bool has_last = last != nullptr && *last != '\0';
  std::fprintf(stderr, "%s failed: %s%s%s\n", call, ncclGetErrorString(rc), has_last ? ": " : "", has_last ? last : "");
}

// Before any CUDA call, so a job that cannot bootstrap says why at once: a
// world above one shares the id over MPI_COMM_WORLD, which must be the
// world the caller means.
void check_bootstrap_possible(int rank, int world_size) {
  if (world_size == 1) return;
#if defined(DDP_HAVE_MPI)
  int mpi_initialized = 0;
  DDP_MPI_CHECK(MPI_Initialized(&mpi_initialized));
  DDP_REQUIRE(mpi_initialized != 0, "the NCCL id of a world of " + std::to_string(world_size) +
                                        " is shared with MPI_Bcast; initialise MPI (MpiEnvironment) first");
  int mpi_rank = 0, mpi_world = 0;
  DDP_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank));
  DDP_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &mpi_world));
  DDP_REQUIRE(mpi_rank == rank && mpi_world == world_size,
              "NCCL rank " + std::to_string(rank) + " of " + std::to_string(world_size) + " is MPI rank " +
                  std::to_string(mpi_rank) + " of " + std::to_string(mpi_world));
#else
  (void)rank;
  throw Error("a world of " + std::to_string(world_size) +
              " needs MPI to share the NCCL id, and this build has none (DDP_MPI=OFF); run one rank");
#endif
}

// Rank 0's id on every rank. A world of one needs no MPI.
ncclUniqueId shared_unique_id(int rank, int world_size) {
  ncclUniqueId id{};
  if (rank == 0) DDP_NCCL_CHECK(ncclGetUniqueId(&id));
#if defined(DDP_HAVE_MPI)
  if (world_size > 1) DDP_MPI_CHECK(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD));
#else
  (void)world_size;  // check_bootstrap_possible allowed only a world of one
#endif
  return id;
}

}  // namespace

std::string nccl_version_text(int version_code) {
  const bool since_2_9 = version_code >= 10000;  // 2.9.0 is 20900; the old scheme ends at 2.8.x = 28xx
  const int major = since_2_9 ? version_code / 10000 : version_code / 1000;
  const int minor = since_2_9 ? version_code / 100 % 100 : version_code / 100 % 10;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(version_code % 100);
}

std::string nccl_capture_unsupported_reason(int version_code) {
  if (nccl_version_supports_capture(version_code)) return "";
  return "NCCL " + nccl_version_text(version_code) +
         " cannot capture its collectives in a CUDA graph (that needs NCCL >= " +
         nccl_version_text(kFirstCapturableNcclVersion) + "); use a newer NCCL or run without --cuda-graph";
}

NcclCommunicator::NcclCommunicator(int rank, int world_size, cudaStream_t compute_stream, int shard_size,
                                   Precision precision)
    : rank_(rank),
      world_size_(world_size),
      shard_size_(shard_size == 0 ? world_size : shard_size),
      version_code_(linked_nccl_version()),
      name_("NCCL " + nccl_version_text(version_code_)),
      precision_(precision),
      lowp_type_(precision == Precision::Bf16 ? ncclBfloat16 : ncclFloat16),
      compute_stream_(compute_stream) {
  DDP_REQUIRE(world_size_ >= 1 && rank_ >= 0 && rank_ < world_size_,
              "rank " + std::to_string(rank_) + " is outside a world of " + std::to_string(world_size_));
  check_bootstrap_possible(rank_, world_size_);
  DDP_REQUIRE(shard_size_ >= 1 && shard_size_ <= world_size_ && world_size_ % shard_size_ == 0,
              "shard groups of " + std::to_string(shard_size_) + " ranks do not divide a world of " +
                  std::to_string(world_size_));
  shard_rank_ = rank_ % shard_size_;
  // Non-blocking: the legacy default stream must not serialise communication
  // with compute.
  comm_stream_ = make_non_blocking_stream();
  compute_ready_ = make_ordering_event();
  comm_done_ = make_ordering_event();
  // Last, so nothing after it can throw and leak the communicator (the
  // destructor does not run for a constructor that throws); the splits
  // abort what exists when they fail.
  DDP_NCCL_CHECK(ncclCommInitRank(&comm_, world_size_, shared_unique_id(rank_, world_size_), rank_));
  if (shard_size_ == world_size_) return;
  try {
    split_shard_groups();
  } catch (...) {
    abort_comms();
    throw;
  }
}

// ncclCommSplit came with NCCL 2.18: older headers build without groups and
// refuse them. splitShare lets the three communicators share resources
// (their collectives are serialised on comm_stream anyway).
void NcclCommunicator::split_shard_groups() {
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 18, 0)
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.splitShare = 1;
  DDP_NCCL_CHECK(ncclCommSplit(comm_, rank_ / shard_size_, rank_, &shard_comm_, &config));
  DDP_NCCL_CHECK(ncclCommSplit(comm_, shard_rank_, rank_, &replica_comm_, &config));
#else
  throw Error("--zero-shard-size " + std::to_string(shard_size_) + ": this build's NCCL (" +
              std::to_string(NCCL_VERSION_CODE) + ") has no ncclCommSplit; hybrid sharding needs NCCL 2.18 or later");
#endif
}

void NcclCommunicator::abort_comms() noexcept {
  for (ncclComm_t* c : {&replica_comm_, &shard_comm_, &comm_}) {
    if (*c != nullptr) report_nccl_error(ncclCommAbort(*c), "ncclCommAbort");
  }
}

// The owner's thread; a watchdog abort still in progress finishes first
// (the gate), and one that came first leaves nothing to release.
NcclCommunicator::~NcclCommunicator() {
  if (comm_ != nullptr) close_comm();
  // The sharded collectives' staging buffer, after the communicator (an
  // abort above ends NCCL kernels that would hold its copies back). A
  // captured graph stuck on a missing peer may still use it, and cudaFree
  // waits for the device in practice: leave it to the end of the process.
  if (std::uncaught_exceptions() > 0 && captured_) {
    static_cast<void>(staging_.release());
  } else if (staging_ && std::uncaught_exceptions() == 0) {
    DDP_CUDA_CHECK_NOTHROW(cudaStreamSynchronize(comm_stream()));  // its copies are done before the free
  }
}

void NcclCommunicator::close_comm() noexcept {
  gate_.close([this] {
    // ncclCommDestroy first finalises, which waits until every rank's
    // communicator is quiescent; a rank that is unwinding from an error
    // would wait there for peers that may never come, instead of reaching
    // main's catch and ending the job.
    if (std::uncaught_exceptions() > 0) {
      // With captured graphs NCCL's teardown waits for them, and one may be
      // waiting for a peer that is gone: leave the communicator to the end
      // of the process (main's catch ends the job) rather than hang here.
      if (!captured_) abort_comms();
    } else {
      for (ncclComm_t c : {replica_comm_, shard_comm_, comm_}) {
        if (c != nullptr) report_nccl_error(ncclCommDestroy(c), "ncclCommDestroy");
      }
    }
  });
}

// From the watchdog's thread, while the owner's thread may be anywhere:
//  - between calls, or in a host wait for the device (a stream sync, a copy
//    to the host: the usual place of a stall, the NCCL kernels waiting for
//    the dead peer): the gate is free, ncclCommAbort ends those kernels and
//    frees the communicator, and the owner's next call throws;
//  - inside an NCCL call (start_allreduce_sum_lowp, broadcast_bytes): the
//    gate waits for it, as NCCL forbids a second thread on the communicator
//    (its thread-safety rules make no exception for ncclCommAbort of a
//    blocking communicator, which ncclCommInitRank makes). Enqueueing
//    normally takes microseconds, but a blocking communicator's call can
//    wait for a dead peer (the first collective of a kind connects to its
//    peers) or for the device (NCCL's queue of work is full): after
//    gate_wait the abort gives up, and only marks the communicator aborted. The process ends next (the watchdog calls
//    MPI_Abort), which frees the device work as surely; a bounded wait is
//    the point, since an abort that hung would keep MPI_Abort from running.
// Either way nothing is printed here when all goes well: the watchdog's line
// is the job's one error line.
void NcclCommunicator::abort(std::chrono::milliseconds gate_wait) noexcept {
  if (comm_ == nullptr) return;
  gate_.abort(gate_wait, [this] {
    // ncclCommAbort waits until no CUDA graph refers to the communicator
    // (NCCL's commDestroySync), and a captured step stuck on a missing peer
    // never ends: the caller ends the process instead (MPI_Abort), which
    // takes the device work with it.
    if (captured_) return;
    abort_comms();
  });
}

// Events, not host syncs: the host goes on queueing while the streams wait
// for each other on the device. One event per direction is enough, because
// cudaStreamWaitEvent captures the event's latest record when it is called.
void NcclCommunicator::comm_waits_for_compute() {
  DDP_CUDA_CHECK(cudaEventRecord(compute_ready_.get(), compute_stream_));
  DDP_CUDA_CHECK(cudaStreamWaitEvent(comm_stream(), compute_ready_.get(), 0));
}

void NcclCommunicator::compute_waits_for_comm() {
  DDP_CUDA_CHECK(cudaEventRecord(comm_done_.get(), comm_stream()));
  DDP_CUDA_CHECK(cudaStreamWaitEvent(compute_stream_, comm_done_.get(), 0));
}

void NcclCommunicator::allreduce_sum_lowp(lowp16* data, size_t count) {
  start_allreduce_sum_lowp(data, count);
  wait_allreduces();
}

// Each event pair is a timing record: busy (on comm_stream, around the
// collective) or exposed (on compute_stream, around its wait for the
// collectives). The pools grow to the longest interval between takes.
std::pair<cudaEvent_t, cudaEvent_t> NcclCommunicator::next_timing_pair(TimingPool& pool) {
  if (pool.used == pool.events.size()) pool.events.emplace_back(make_timing_event(), make_timing_event());
  auto& [start, end] = pool.events[pool.used++];
  return {start.get(), end.get()};
}

double NcclCommunicator::drain_seconds(TimingPool& pool) {
  double ms_total = 0.0;
  for (size_t i = 0; i < pool.used; ++i) {
    auto& [start, end] = pool.events[i];
    DDP_CUDA_CHECK(cudaEventSynchronize(end.get()));
    float ms = 0.0f;
    DDP_CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), end.get()));
    ms_total += ms;
  }
  pool.used = 0;
  return ms_total / 1e3;
}

NcclCommunicator::CollectiveTiming NcclCommunicator::begin_collective(const char* op, size_t elements,
                                                                      size_t element_bytes) {
  comm_waits_for_compute();
  CollectiveTiming t;
  if (capturing_) return t;  // replays of a captured step are not timed
  const auto [start, end] = next_timing_pair(busy_events_);
  DDP_CUDA_CHECK(cudaEventRecord(start, comm_stream()));  // reached once the inputs are written
  t.busy_end = end;
  t.trace = open_record(op, elements, element_bytes).get();  // the trace's records keep it
  if (t.trace != nullptr) {
    const auto [trace_start, trace_end] = next_timing_pair(trace_events_);
    DDP_CUDA_CHECK(cudaEventRecord(trace_start, comm_stream()));
    t.trace->device_begin = trace_start;
    t.trace->device_end = trace_end;
  }
  return t;
}

void NcclCommunicator::end_collective(const CollectiveTiming& t) {
  if (t.busy_end != nullptr) DDP_CUDA_CHECK(cudaEventRecord(t.busy_end, comm_stream()));
  if (t.trace != nullptr) DDP_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(t.trace->device_end), comm_stream()));
  allreduces_pending_ = true;
}

void NcclCommunicator::resolve_trace_times() {
  if (trace_ == nullptr || trace_->device_origin == nullptr) return;
  const auto origin = static_cast<cudaEvent_t>(trace_->device_origin);
  for (const std::shared_ptr<CollectiveRecord>& record : trace_->records()) {
    CollectiveRecord& r = *record;
    if (r.device_begin == nullptr) continue;
    r.begin_us = trace_->device_origin_us + cuda_event_us_since(origin, static_cast<cudaEvent_t>(r.device_begin));
    r.end_us = trace_->device_origin_us + cuda_event_us_since(origin, static_cast<cudaEvent_t>(r.device_end));
    r.device_begin = r.device_end = nullptr;
  }
  trace_events_.used = 0;
}

// The gate is held from the liveness check through ncclAllReduce. Nothing
// here waits for the device except what NCCL itself may do (see abort()).
void NcclCommunicator::start_allreduce_sum_lowp(lowp16* data, size_t count) {
  const AbortGate::Pass pass = gate_.enter("allreduce_sum_lowp");
  if (count == 0) return;  // every rank passes the same count, so all skip
  const CollectiveTiming timing = begin_collective("all-reduce", count);
  DDP_NCCL_CHECK(ncclAllReduce(data, data, count, lowp_type_, ncclSum, comm_, comm_stream()));
  end_collective(timing);
}

void NcclCommunicator::start_allreduce_sum_fp32(float* data, size_t count) {
  const AbortGate::Pass pass = gate_.enter("allreduce_sum_fp32");
  if (count == 0) return;
  const CollectiveTiming timing = begin_collective("all-reduce", count, sizeof(float));
  DDP_NCCL_CHECK(ncclAllReduce(data, data, count, ncclFloat32, ncclSum, comm_, comm_stream()));
  end_collective(timing);
}

void NcclCommunicator::wait_allreduces() {
  marks_used_ = 0;  // every mark is passed after this wait
  ++mark_generation_;
  if (!allreduces_pending_) return;
  if (capturing_) {
    compute_waits_for_comm();  // the join back to the capturing stream
    allreduces_pending_ = false;
    return;
  }
  const auto [start, end] = next_timing_pair(exposed_events_);
  DDP_CUDA_CHECK(cudaEventRecord(start, compute_stream_));
  compute_waits_for_comm();
  DDP_CUDA_CHECK(cudaEventRecord(end, compute_stream_));
  allreduces_pending_ = false;
}

// A mark is an event recorded on comm_stream after what is queued there:
// waiting for it orders the compute stream after those collectives only.
Communicator::CollectiveMark NcclCommunicator::mark_started() {
  if (!allreduces_pending_) return 0;
  if (marks_used_ == mark_events_.size()) mark_events_.push_back(make_ordering_event());
  DDP_CUDA_CHECK(cudaEventRecord(mark_events_[marks_used_].get(), comm_stream()));
  return (mark_generation_ << 32) | ++marks_used_;
}

void NcclCommunicator::wait_until(CollectiveMark mark) {
  const uint64_t index = mark & 0xffffffffu;
  if (index == 0 || (mark >> 32) != mark_generation_) return;  // nothing pending then, or passed since
  cudaEvent_t done = mark_events_[index - 1].get();
  if (capturing_) {
    DDP_CUDA_CHECK(cudaStreamWaitEvent(compute_stream_, done, 0));
    return;
  }
  const auto [start, end] = next_timing_pair(exposed_events_);
  DDP_CUDA_CHECK(cudaEventRecord(start, compute_stream_));
  DDP_CUDA_CHECK(cudaStreamWaitEvent(compute_stream_, done, 0));
  DDP_CUDA_CHECK(cudaEventRecord(end, compute_stream_));
}

AllreduceTimes NcclCommunicator::take_allreduce_times() {
  AllreduceTimes t;
  t.busy_s = drain_seconds(busy_events_);
  t.exposed_s = drain_seconds(exposed_events_);
  return t;
}

void NcclCommunicator::broadcast_bytes(void* data, size_t size_bytes, int root) {
  const AbortGate::Pass pass = gate_.enter("broadcast_bytes");  // as start_allreduce_sum_lowp
  wait_allreduces();
  DDP_REQUIRE(root >= 0 && root < world_size_,
              "broadcast root " + std::to_string(root) + " is outside a world of " + std::to_string(world_size_));
  if (size_bytes == 0) return;
  comm_waits_for_compute();
  DDP_NCCL_CHECK(ncclBroadcast(data, data, size_bytes, ncclUint8, root, comm_, comm_stream()));
  compute_waits_for_comm();
}

double NcclCommunicator::allreduce_sum_host(double value) {
  double sum = value;
#if defined(DDP_HAVE_MPI)
  // Metrics only: a host round trip per call is fine here, never per bucket.
  if (world_size_ > 1) DDP_MPI_CHECK(MPI_Allreduce(&value, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
#endif
  return sum;
}

// Each member of a group sums the same values in the same order: the same bits.
double NcclCommunicator::allreduce_sum_host_shard_group(double value) {
  if (shard_size_ == world_size_) return allreduce_sum_host(value);
  double sum = 0.0;
#if defined(DDP_HAVE_MPI)
  std::vector<double> all(static_cast<size_t>(world_size_));
  DDP_MPI_CHECK(MPI_Allgather(&value, 1, MPI_DOUBLE, all.data(), 1, MPI_DOUBLE, MPI_COMM_WORLD));
  const int first = rank_ - shard_rank_;
  for (int r = first; r < first + shard_size_; ++r) sum += all[static_cast<size_t>(r)];
#else
  sum = value;  // check_bootstrap_possible allowed only a world of one
#endif
  return sum;
}

int64_t NcclCommunicator::allreduce_max_host(int64_t value) {
  int64_t max = value;
#if defined(DDP_HAVE_MPI)
  if (world_size_ > 1) DDP_MPI_CHECK(MPI_Allreduce(&value, &max, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD));
#endif
  return max;
}

void NcclCommunicator::barrier() {
  wait_allreduces();
  // A barrier is a host sync point anyway: collectives queued before it are
  // complete on this rank when it returns. No gate: this waits for the
  // device (the stall an abort must be able to end), and calls no NCCL.
  DDP_CUDA_CHECK(cudaStreamSynchronize(comm_stream()));
#if defined(DDP_HAVE_MPI)
  if (world_size_ > 1) DDP_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
#endif
}

}  // namespace ddp
