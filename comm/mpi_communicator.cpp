// mpi_communicator.cpp
#include "comm/mpi_communicator.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "comm/mpi_check.h"
#include "comm/sum16.h"
#include "kernels/stream_marks.h"

namespace ddp {
namespace {
// inout[i] = fp16(float(in[i]) + float(inout[i])): one rounding per pairwise
// step, at memory speed (comm/sum16.h); bf16 likewise.
void half_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  sum_into_fp16(static_cast<const lowp16*>(in), static_cast<lowp16*>(inout), static_cast<size_t>(*len));
}
void bfloat16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  sum_into_bf16(static_cast<const lowp16*>(in), static_cast<lowp16*>(inout), static_cast<size_t>(*len));
}
// MPI counts are int: large buffers go in chunks.
constexpr size_t kMaxChunk = static_cast<size_t>(INT_MAX) / 2;
}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm comm, int shard_size, Precision precision)
    : comm_(comm), precision_(precision) {
  DDP_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  DDP_MPI_CHECK(MPI_Comm_size(comm_, &world_size_));
  if (shard_size == 0) shard_size = world_size_;
  if (shard_size < 1 || shard_size > world_size_ || world_size_ % shard_size != 0)
    throw Error("shard groups of " + std::to_string(shard_size) + " ranks do not divide a world of " +
                std::to_string(world_size_));
  shard_size_ = shard_size;
  shard_rank_ = rank_ % shard_size_;
  if (shard_size_ < world_size_) {
    DDP_MPI_CHECK(MPI_Comm_split(comm_, rank_ / shard_size_, rank_, &shard_comm_));
    DDP_MPI_CHECK(MPI_Comm_split(comm_, shard_rank_, rank_, &replica_comm_));
  }
  DDP_MPI_CHECK(MPI_Type_contiguous(2, MPI_BYTE, &half_type_));
  DDP_MPI_CHECK(MPI_Type_commit(&half_type_));
  DDP_MPI_CHECK(MPI_Op_create(precision == Precision::Bf16 ? &bfloat16_sum : &half_sum, /*commute=*/1, &half_sum_));
  int provided = MPI_THREAD_SINGLE;
  DDP_MPI_CHECK(MPI_Query_thread(&provided));
  if (world_size_ > 1 && provided >= MPI_THREAD_SERIALIZED) thread_ = std::thread([this] { thread_main(); });
}

MpiCommunicator::~MpiCommunicator() {
  if (thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    work_ready_.notify_all();
    thread_.join();
  }
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (replica_comm_ != MPI_COMM_NULL) MPI_Comm_free(&replica_comm_);
  if (shard_comm_ != MPI_COMM_NULL) MPI_Comm_free(&shard_comm_);
  if (half_sum_ != MPI_OP_NULL) MPI_Op_free(&half_sum_);
  if (half_type_ != MPI_DATATYPE_NULL) MPI_Type_free(&half_type_);
}

void MpiCommunicator::add_busy(double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  times_.busy_s += seconds;
}

void MpiCommunicator::run_allreduce(void* data, size_t count, const SumWire& wire, CollectiveRecord* rec) {
  const double start = MPI_Wtime();
  if (rec != nullptr) rec->begin_us = trace_clock_us();
  char* bytes = static_cast<char*>(data);
  for (size_t off = 0; off < count; off += kMaxChunk) {
    const int n = static_cast<int>(std::min(kMaxChunk, count - off));
    DDP_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, bytes + off * wire.bytes, n, wire.type, wire.op, comm_));
  }
  if (rec != nullptr) rec->end_us = trace_clock_us();
  add_busy(MPI_Wtime() - start);
}

// Chunks of at most kMaxChunk elements of the full buffer, each a slice of
// the layout, so every count and displacement fits an int. With shard
// groups, each chunk's range is then summed across the replicas.
void MpiCommunicator::run_reduce_scatter(const void* send, void* recv, const ShardLayout& layout, bool in_place,
                                         const SumWire& wire, CollectiveRecord* rec) {
  const double start = MPI_Wtime();
  if (rec != nullptr) rec->begin_us = trace_clock_us();
  const ShardRange mine = layout.range(shard_rank_);
  const char* send_bytes = static_cast<const char*>(send);
  char* recv_bytes = static_cast<char*>(recv);
  std::vector<int> counts(static_cast<size_t>(shard_size_));
  for (size_t off = 0; off < layout.total_count(); off += kMaxChunk) {
    const ShardLayout chunk = layout.slice(off, std::min(kMaxChunk, layout.total_count() - off));
    for (int q = 0; q < shard_size_; ++q) counts[static_cast<size_t>(q)] = static_cast<int>(chunk.range(q).count());
    const ShardRange my = chunk.range(shard_rank_);  // chunk-relative
    char* sum = nullptr;                             // this rank's sums of the chunk
    if (in_place) {
      // MPI_IN_PLACE reads the whole chunk from the receive buffer and
      // leaves this rank's sum at its start: move it to its own place.
      char* chunk_data = const_cast<char*>(send_bytes) + off * wire.bytes;  // in place: the caller's recv, writable
      DDP_MPI_CHECK(MPI_Reduce_scatter(MPI_IN_PLACE, chunk_data, counts.data(), wire.type, wire.op, shard_comm()));
      if (my.count() > 0) std::memmove(chunk_data + my.begin * wire.bytes, chunk_data, my.count() * wire.bytes);
      sum = chunk_data + my.begin * wire.bytes;
    } else {
      sum = my.count() > 0 ? recv_bytes + (off + my.begin - mine.begin) * wire.bytes : recv_bytes;
      DDP_MPI_CHECK(
          MPI_Reduce_scatter(send_bytes + off * wire.bytes, sum, counts.data(), wire.type, wire.op, shard_comm()));
    }
    // Every replica has the same place in its group, so the same count.
    if (replica_comm_ != MPI_COMM_NULL && my.count() > 0)
      DDP_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, sum, static_cast<int>(my.count()), wire.type, wire.op, replica_comm_));
  }
  if (rec != nullptr) rec->end_us = trace_clock_us();
  add_busy(MPI_Wtime() - start);
}

void MpiCommunicator::run_allgather(const lowp16* mine, lowp16* full, const ShardLayout& layout, bool in_place,
                                    CollectiveRecord* rec) {
  const double start = MPI_Wtime();
  if (rec != nullptr) rec->begin_us = trace_clock_us();
  const ShardRange own = layout.range(shard_rank_);
  std::vector<int> counts(static_cast<size_t>(shard_size_)), displacements(counts.size());
  for (size_t off = 0; off < layout.total_count(); off += kMaxChunk) {
    const ShardLayout chunk = layout.slice(off, std::min(kMaxChunk, layout.total_count() - off));
    for (int q = 0; q < shard_size_; ++q) {
      counts[static_cast<size_t>(q)] = static_cast<int>(chunk.range(q).count());
      displacements[static_cast<size_t>(q)] = static_cast<int>(chunk.range(q).begin);
    }
    const ShardRange my = chunk.range(shard_rank_);
    const lowp16* src = my.count() > 0 ? mine + (off + my.begin - own.begin) : mine;
    DDP_MPI_CHECK(MPI_Allgatherv(in_place ? MPI_IN_PLACE : src, static_cast<int>(my.count()), half_type_, full + off,
                                 counts.data(), displacements.data(), half_type_, shard_comm()));
  }
  if (rec != nullptr) rec->end_us = trace_clock_us();
  add_busy(MPI_Wtime() - start);
}

void MpiCommunicator::thread_main() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    const std::function<void()> job = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    std::exception_ptr failure;
    try {
      job();
    } catch (...) {
      failure = std::current_exception();
    }
    lock.lock();
    busy_ = false;
    ++finished_;
    if (failure && !failure_) failure_ = failure;
    work_done_.notify_all();
  }
}

void MpiCommunicator::enqueue(std::function<void()> job) {
  if (!thread_.joinable()) {  // no MPI_THREAD_SERIALIZED (or a world of one): in place, all exposed
    const double start = MPI_Wtime();
    job();
    std::lock_guard<std::mutex> lock(mutex_);
    times_.exposed_s += MPI_Wtime() - start;
    ++started_;
    ++finished_;
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(job));
    ++started_;
  }
  work_ready_.notify_one();
}

// Nothing queued after the wait: run on the calling thread (MPI is idle, so
// this keeps to SERIALIZED) and skip the hand-off to the thread, which costs
// ~15 us per call.
void MpiCommunicator::run_now(const std::function<void()>& job) {
  wait_allreduces();
  const double start = MPI_Wtime();
  job();
  std::lock_guard<std::mutex> lock(mutex_);
  times_.exposed_s += MPI_Wtime() - start;
}

void MpiCommunicator::start_allreduce_sum_lowp(lowp16* data, size_t count) {
  if (world_size_ == 1 || count == 0) return;
  const std::shared_ptr<CollectiveRecord> rec = open_record("all-reduce", count);
  enqueue([this, data, count, rec] { run_allreduce(data, count, lowp_wire(), rec.get()); });
}

void MpiCommunicator::start_allreduce_sum_fp32(float* data, size_t count) {
  if (world_size_ == 1 || count == 0) return;
  const std::shared_ptr<CollectiveRecord> rec = open_record("all-reduce", count, sizeof(float));
  enqueue([this, data, count, rec] { run_allreduce(data, count, fp32_wire(), rec.get()); });
}

void MpiCommunicator::wait_allreduces() {
  if (!thread_.joinable()) return;
  const double start = MPI_Wtime();
  std::unique_lock<std::mutex> lock(mutex_);
  work_done_.wait(lock, [this] { return queue_.empty() && !busy_; });
  times_.exposed_s += MPI_Wtime() - start;
  if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
}

Communicator::CollectiveMark MpiCommunicator::mark_started() {
  std::lock_guard<std::mutex> lock(mutex_);
  return started_;
}

// As wait_allreduces, for the collectives up to the mark: the thread runs
// them in order, so `finished_` passing the mark means each is done.
void MpiCommunicator::wait_until(CollectiveMark mark) {
  if (!thread_.joinable()) return;
  const double start = MPI_Wtime();
  std::unique_lock<std::mutex> lock(mutex_);
  work_done_.wait(lock, [this, mark] { return finished_ >= mark || failure_; });
  times_.exposed_s += MPI_Wtime() - start;
  if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
}

void MpiCommunicator::allreduce_sum_lowp(lowp16* data, size_t count) {
  if (world_size_ == 1 || count == 0) return wait_allreduces();
  const std::shared_ptr<CollectiveRecord> rec = open_record("all-reduce", count);
  run_now([&] { run_allreduce(data, count, lowp_wire(), rec.get()); });
}

// The checks run on the caller's thread, so a bad call throws at once.
void MpiCommunicator::reduce_scatter_sum_lowp(const lowp16* send, lowp16* recv, const ShardLayout& layout) {
  const bool in_place = check_reduce_scatter(send, recv, layout);
  const std::shared_ptr<CollectiveRecord> rec = open_record("reduce-scatter", layout.total_count());
  run_now([&] { run_reduce_scatter(send, recv, layout, in_place, lowp_wire(), rec.get()); });
}

void MpiCommunicator::start_reduce_scatter_sum_lowp(const lowp16* send, lowp16* recv, const ShardLayout& layout) {
  const bool in_place = check_reduce_scatter(send, recv, layout);
  const std::shared_ptr<CollectiveRecord> rec = open_record("reduce-scatter", layout.total_count());
  enqueue([this, send, recv, layout, in_place, rec] {
    run_reduce_scatter(send, recv, layout, in_place, lowp_wire(), rec.get());
  });
}

void MpiCommunicator::start_reduce_scatter_sum_fp32(const float* send, float* recv, const ShardLayout& layout) {
  check_layout_world(*this, layout, "reduce_scatter_sum_fp32");
  const ShardRange mine = layout.range(shard_rank_);
  const bool in_place =
      shard_call_in_place(send, layout.total_count(), recv, mine.begin, mine.count(), "reduce_scatter_sum_fp32");
  const std::shared_ptr<CollectiveRecord> rec = open_record("reduce-scatter", layout.total_count(), sizeof(float));
  enqueue([this, send, recv, layout, in_place, rec] {
    run_reduce_scatter(send, recv, layout, in_place, fp32_wire(), rec.get());
  });
}

void MpiCommunicator::allgather_lowp(const lowp16* mine, lowp16* full, const ShardLayout& layout) {
  const bool in_place = check_allgather(mine, full, layout);
  const std::shared_ptr<CollectiveRecord> rec = open_record("all-gather", layout.total_count());
  run_now([&] { run_allgather(mine, full, layout, in_place, rec.get()); });
}

void MpiCommunicator::start_allgather_lowp(const lowp16* mine, lowp16* full, const ShardLayout& layout) {
  const bool in_place = check_allgather(mine, full, layout);
  const std::shared_ptr<CollectiveRecord> rec = open_record("all-gather", layout.total_count());
  enqueue([this, mine, full, layout, in_place, rec] { run_allgather(mine, full, layout, in_place, rec.get()); });
}

bool MpiCommunicator::check_reduce_scatter(const lowp16* send, lowp16* recv, const ShardLayout& layout) const {
  check_layout_world(*this, layout, "reduce_scatter_sum_lowp");
  const ShardRange mine = layout.range(shard_rank_);
  return shard_call_in_place(send, layout.total_count(), recv, mine.begin, mine.count(), "reduce_scatter_sum_lowp");
}

bool MpiCommunicator::check_allgather(const lowp16* mine, lowp16* full, const ShardLayout& layout) const {
  check_layout_world(*this, layout, "allgather_lowp");
  const ShardRange own = layout.range(shard_rank_);
  return shard_call_in_place(full, layout.total_count(), mine, own.begin, own.count(), "allgather_lowp");
}

AllreduceTimes MpiCommunicator::take_allreduce_times() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::exchange(times_, AllreduceTimes{});
}

// The calls below run on the main thread between steps: after
// wait_allreduces, so MPI is never entered by two threads at once.
void MpiCommunicator::broadcast_bytes(void* data, size_t size_bytes, int root) {
  wait_allreduces();
  if (world_size_ == 1) return;
  char* p = static_cast<char*>(data);
  for (size_t off = 0; off < size_bytes; off += kMaxChunk) {
    const int n = static_cast<int>(std::min(kMaxChunk, size_bytes - off));
    DDP_MPI_CHECK(MPI_Bcast(p + off, n, MPI_BYTE, root, comm_));
  }
}

double MpiCommunicator::allreduce_sum_host(double value) {
  wait_allreduces();
  double sum = value;
  if (world_size_ > 1) DDP_MPI_CHECK(MPI_Allreduce(&value, &sum, 1, MPI_DOUBLE, MPI_SUM, comm_));
  return sum;
}

// Gathered and summed in group rank order, not MPI_Allreduce'd: every
// group then adds the same values (each replica holds the same ranges) in
// the same order, so the replicas get the same bits whatever algorithm
// MPI picks for each group (a clipping coefficient that differed between
// replicas would let them drift apart).
double MpiCommunicator::allreduce_sum_host_shard_group(double value) {
  wait_allreduces();
  if (shard_size_ == 1) return value;
  std::vector<double> all(static_cast<size_t>(shard_size_));
  DDP_MPI_CHECK(MPI_Allgather(&value, 1, MPI_DOUBLE, all.data(), 1, MPI_DOUBLE, shard_comm()));
  double sum = 0.0;
  for (double v : all) sum += v;
  return sum;
}

int64_t MpiCommunicator::allreduce_max_host(int64_t value) {
  wait_allreduces();
  int64_t max = value;
  if (world_size_ > 1) DDP_MPI_CHECK(MPI_Allreduce(&value, &max, 1, MPI_INT64_T, MPI_MAX, comm_));
  return max;
}

void MpiCommunicator::allreduce_max_int32(int32_t* data, size_t count) {
  wait_allreduces();
  if (world_size_ == 1 || count == 0) return;
  DDP_REQUIRE(count <= static_cast<size_t>(INT_MAX), "allreduce_max_int32 of " + std::to_string(count) + " flags");
  DDP_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(count), MPI_INT32_T, MPI_MAX, comm_));
}

void MpiCommunicator::barrier() {
  wait_allreduces();
  if (world_size_ > 1) DDP_MPI_CHECK(MPI_Barrier(comm_));
}

}  // namespace ddp
