// mpi_logging_communicator.h: MPI (forwarded: MpiCommunicator is final)
// with a log of the layer hooks' marks ('M') and waits ('W'), for the
// suites that check when ZeRO's gathers start and are waited for
// (mpi_test_zero_prefetch.cpp, mpi_test_zero_update_gathers.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "comm/mpi_communicator.h"

namespace ddp::test {

class LoggingCommunicator final : public Communicator {
 public:
  // `shard_size`: MpiCommunicator's (0: no shard groups); `precision`, its sums'.
  explicit LoggingCommunicator(int shard_size = 0, Precision precision = Precision::Fp16)
      : mpi_(MPI_COMM_WORLD, shard_size, precision) {}
  Precision precision() const override { return mpi_.precision(); }
  int rank() const override { return mpi_.rank(); }
  int world_size() const override { return mpi_.world_size(); }
  int shard_rank() const override { return mpi_.shard_rank(); }
  int shard_size() const override { return mpi_.shard_size(); }
  double allreduce_sum_host_shard_group(double value) override { return mpi_.allreduce_sum_host_shard_group(value); }
  std::string name() const override { return mpi_.name(); }
  void allreduce_sum_lowp(lowp16* data, size_t count) override { mpi_.allreduce_sum_lowp(data, count); }
  void broadcast_bytes(void* data, size_t size_bytes, int root) override {
    mpi_.broadcast_bytes(data, size_bytes, root);
  }
  double allreduce_sum_host(double value) override { return mpi_.allreduce_sum_host(value); }
  int64_t allreduce_max_host(int64_t value) override { return mpi_.allreduce_max_host(value); }
  void allreduce_max_int32(int32_t* data, size_t count) override { mpi_.allreduce_max_int32(data, count); }
  void barrier() override { mpi_.barrier(); }
  void reduce_scatter_sum_lowp(const lowp16* send, lowp16* recv, const ShardLayout& layout) override {
    mpi_.reduce_scatter_sum_lowp(send, recv, layout);
  }
  void allgather_lowp(const lowp16* mine, lowp16* full, const ShardLayout& layout) override {
    mpi_.allgather_lowp(mine, full, layout);
  }
  void start_allreduce_sum_lowp(lowp16* data, size_t count) override { mpi_.start_allreduce_sum_lowp(data, count); }
  void start_reduce_scatter_sum_lowp(const lowp16* send, lowp16* recv, const ShardLayout& layout) override {
    mpi_.start_reduce_scatter_sum_lowp(send, recv, layout);
  }
  void start_allgather_lowp(const lowp16* mine, lowp16* full, const ShardLayout& layout) override {
    mpi_.start_allgather_lowp(mine, full, layout);
  }
  void wait_allreduces() override { mpi_.wait_allreduces(); }
  AllreduceTimes take_allreduce_times() override { return mpi_.take_allreduce_times(); }
  CollectiveMark mark_started() override {
    log += 'M';
    return mpi_.mark_started();
  }
  void wait_until(CollectiveMark mark) override {
    log += 'W';
    mpi_.wait_until(mark);
  }
  std::string log;

 private:
  MpiCommunicator mpi_;
};

}  // namespace ddp::test
