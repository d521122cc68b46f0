// mpi_communicator.h: the Communicator over MPI, for CPU ranks (and GPU hosts
// without NCCL). FP16 sums use a user-defined commutative MPI operation that
// adds in FP32 and rounds to FP16 at each step, as NCCL's FP16 reduction does.
// Buffers are host memory (the CPU backend's).
//
// Bucketed all-reduces run on a communication thread, so a bucket's sum
// proceeds while the main thread computes the next layers' gradients (MPI's
// non-blocking collectives would progress only inside MPI calls, which the
// main thread does not make during backward). MPI must provide
// MPI_THREAD_SERIALIZED: the main thread calls MPI only after waiting for
// the thread's work. Without it, start_allreduce_sum_lowp runs in place.
//
// Sharded collectives: MPI_Reduce_scatter with the same FP16 sum (receive
// counts = the layout's range lengths; the adds' order is Open MPI's
// reduce-scatter algorithm's, which may differ from its all-reduce's) and
// MPI_Allgatherv (displacements = range begins): uneven ranges need no
// padding. They queue on the same thread as the bucketed all-reduces.
// Shard groups (a shard size below the world's): two communicators split
// from the world's, one per group of consecutive ranks and one per replica
// set (the ranks of one place in every group); a reduce-scatter inside the
// group is followed, in the same job, by an MPI_Allreduce of the range
// across the replicas, so the thread orders the two.
#pragma once

#include <mpi.h>

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include "comm/communicator.h"

namespace ddp {

class MpiCommunicator final : public Communicator {
 public:
  // `shard_size`: the ranks of a shard group (Communicator::shard_size),
  // a divisor of the world's size; 0, the whole world. Throws ddp::Error
  // for another size. A collective (the splits) when it is below the world.
  // Its sums add `precision`'s 16-bit words (comm/sum16.h).
  explicit MpiCommunicator(MPI_Comm comm = MPI_COMM_WORLD, int shard_size = 0, Precision precision = Precision::Fp16);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  std::string name() const override { return "MPI"; }
  Precision precision() const override { return precision_; }
  int shard_rank() const override { return shard_rank_; }
  int shard_size() const override { return shard_size_; }
  // The group's values gathered and summed in rank order (the same bits in every replica).
  double allreduce_sum_host_shard_group(double value) override;
  void allreduce_sum_lowp(lowp16* data, size_t count) override;
  void start_allreduce_sum_lowp(lowp16* data, size_t count) override;
  void wait_allreduces() override;
  CollectiveMark mark_started() override;
  void wait_until(CollectiveMark mark) override;
  void broadcast_bytes(void* data, size_t size_bytes, int root) override;
  double allreduce_sum_host(double value) override;
  int64_t allreduce_max_host(int64_t value) override;
  // Host memory (MPI_INT32_T, MPI_MAX), after any started collectives.
  void allreduce_max_int32(int32_t* data, size_t count) override;
  void reduce_scatter_sum_lowp(const lowp16* send, lowp16* recv, const ShardLayout& layout) override;
  void allgather_lowp(const lowp16* mine, lowp16* full, const ShardLayout& layout) override;
  void start_reduce_scatter_sum_lowp(const lowp16* send, lowp16* recv, const ShardLayout& layout) override;
  void start_allgather_lowp(const lowp16* mine, lowp16* full, const ShardLayout& layout) override;
  // MPI_FLOAT with MPI_SUM.
  void start_allreduce_sum_fp32(float* data, size_t count) override;
  void start_reduce_scatter_sum_fp32(const float* send, float* recv, const ShardLayout& layout) override;
  void barrier() override;
  AllreduceTimes take_allreduce_times() override;

 private:
  // A sum's elements as MPI moves and adds them: precision_'s 16-bit words
  // (half_type_, the user op half_sum_) or FP32 (MPI_FLOAT, MPI_SUM).
  struct SumWire {
    MPI_Datatype type;
    MPI_Op op;
    size_t bytes;  // of one element
  };
  SumWire lowp_wire() const { return {half_type_, half_sum_, sizeof(lowp16)}; }
  static SumWire fp32_wire() { return {MPI_FLOAT, MPI_SUM, sizeof(float)}; }

  // The run_* calls make the MPI calls, timed into times_.busy_s and, when
  // traced, into `rec` (null: not traced). The sums' buffers hold `wire`'s
  // elements.
  void run_allreduce(void* data, size_t count, const SumWire& wire, CollectiveRecord* rec);
  void run_reduce_scatter(const void* send, void* recv, const ShardLayout& layout, bool in_place, const SumWire& wire,
                          CollectiveRecord* rec);
  void run_allgather(const lowp16* mine, lowp16* full, const ShardLayout& layout, bool in_place, CollectiveRecord* rec);
  // Argument checks (throw ddp::Error); whether the call is in place.
  bool check_reduce_scatter(const lowp16* send, lowp16* recv, const ShardLayout& layout) const;
  bool check_allgather(const lowp16* mine, lowp16* full, const ShardLayout& layout) const;
  // Runs `job` on the thread (start_*), or here when there is none (all exposed).
  void enqueue(std::function<void()> job);
  // Runs `job` here after the thread's work, its time all exposed.
  void run_now(const std::function<void()>& job);
  void add_busy(double seconds);
  void thread_main();

  // The communicator of this rank's shard group: the world's without groups.
  MPI_Comm shard_comm() const { return shard_comm_ != MPI_COMM_NULL ? shard_comm_ : comm_; }

  MPI_Comm comm_;
  int rank_ = 0, world_size_ = 1;
  int shard_rank_ = 0, shard_size_ = 1;
  MPI_Comm shard_comm_ = MPI_COMM_NULL;    // this rank's group; null without groups
  MPI_Comm replica_comm_ = MPI_COMM_NULL;  // the ranks of this place in every group; null without groups
  Precision precision_ = Precision::Fp16;
  MPI_Datatype half_type_ = MPI_DATATYPE_NULL;
  MPI_Op half_sum_ = MPI_OP_NULL;  // the sum of precision_'s words

  std::mutex mutex_;  // guards everything below
  std::condition_variable work_ready_, work_done_;
  std::deque<std::function<void()>> queue_;  // started collectives, in call order
  bool busy_ = false, stopping_ = false;
  uint64_t started_ = 0, finished_ = 0;  // collectives queued and done (marks count these)
  std::exception_ptr failure_;           // an MPI error on the thread, rethrown by wait_allreduces
  AllreduceTimes times_;                 // since the last take_allreduce_times()
  std::thread thread_;                   // last: started once the rest exists
};

}  // namespace ddp
