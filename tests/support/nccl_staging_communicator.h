// nccl_staging_communicator.h (tests): a Communicator that forwards to
// another (MPI on CPU ranks) and behaves as NcclCommunicator does where
// --cuda-graph meets the sharded collectives, so a captured --zero step can
// be checked on CPU ranks:
//   - it can be captured, and queues every collective on the backend's
//     memory through a RecordingBackend (queue_operation), as NCCL's queue
//     on a stream: a capture records them with the step's kernels and every
//     replay runs them, in the same order on every rank;
//   - it keeps NCCL's padded staging as a count alone, sized by
//     needed_staging_count (comm/padded_collectives.h) and grown by the rule
//     of kernels/graph_safe_growth.h, the two decisions NcclCommunicator's
//     staging_lowp makes: a sharded collective that needs more staging
//     after a capture throws here as it does on GPUs.
// Host scalars, the barrier and the timings are the transport's, at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "comm/communicator.h"
#include "comm/padded_collectives.h"
#include "comm/shard_layout.h"
#include "kernels/graph_safe_growth.h"
#include "support/recording_backend.h"

namespace ddp {

class NcclStagingCommunicator final : public Communicator {
 public:
  // Neither is owned; both outlive this.
  NcclStagingCommunicator(Communicator& transport, RecordingBackend& stream) : transport_(transport), stream_(stream) {}

  int rank() const override { return transport_.rank(); }
  int world_size() const override { return transport_.world_size(); }
  int shard_rank() const override { return transport_.shard_rank(); }
  int shard_size() const override { return transport_.shard_size(); }
  double allreduce_sum_host_shard_group(double value) override {
    return transport_.allreduce_sum_host_shard_group(value);
  }
  std::string name() const override { return transport_.name() + " with NCCL's staging rule"; }
  Precision precision() const override { return transport_.precision(); }
  bool supports_capture() const override { return true; }
  void set_capturing(bool on) override {
    capturing_ = on;
    if (on) captured_ = true;
  }
  // FP16 elements of the emulated staging (what NCCL would have allocated).
  size_t staging_count() const { return staging_count_; }

  void allreduce_sum_lowp(lowp16* data, size_t count) override {
    stream_.queue_operation("allreduce_sum_lowp", [this, data, count] { transport_.allreduce_sum_lowp(data, count); });
  }
  void start_allreduce_sum_lowp(lowp16* data, size_t count) override {
    stream_.queue_operation("start_allreduce_sum_lowp",
                            [this, data, count] { transport_.start_allreduce_sum_lowp(data, count); });
  }
  void wait_allreduces() override {
    stream_.queue_operation("wait_allreduces", [this] { transport_.wait_allreduces(); });
  }
  void broadcast_bytes(void* data, size_t size_bytes, int root) override {
    stream_.queue_operation("broadcast_bytes",
                            [this, data, size_bytes, root] { transport_.broadcast_bytes(data, size_bytes, root); });
  }
  void allreduce_max_int32(int32_t* data, size_t count) override {
    stream_.queue_operation("allreduce_max_int32",
                            [this, data, count] { transport_.allreduce_max_int32(data, count); });
  }
  // The staging is sized when the call is made (captured or not), as
  // NcclCommunicator sizes it on the host before it queues the collective.
  void reduce_scatter_sum_lowp(const lowp16* send, lowp16* recv, const ShardLayout& layout) override {
    stage(layout);
    stream_.queue_operation("reduce_scatter_sum_lowp",
                            [this, send, recv, layout] { transport_.reduce_scatter_sum_lowp(send, recv, layout); });
  }
  void start_reduce_scatter_sum_lowp(const lowp16* send, lowp16* recv, const ShardLayout& layout) override {
    stage(layout);
    stream_.queue_operation("start_reduce_scatter_sum_lowp", [this, send, recv, layout] {
      transport_.start_reduce_scatter_sum_lowp(send, recv, layout);
    });
  }
  void allgather_lowp(const lowp16* mine, lowp16* full, const ShardLayout& layout) override {
    stage(layout);
    stream_.queue_operation("allgather_lowp",
                            [this, mine, full, layout] { transport_.allgather_lowp(mine, full, layout); });
  }
  void start_allgather_lowp(const lowp16* mine, lowp16* full, const ShardLayout& layout) override {
    stage(layout);
    stream_.queue_operation("start_allgather_lowp",
                            [this, mine, full, layout] { transport_.start_allgather_lowp(mine, full, layout); });
  }
  void reserve_shard_staging(const ShardLayout& layout) override { stage(layout); }

  double allreduce_sum_host(double value) override { return transport_.allreduce_sum_host(value); }
  int64_t allreduce_max_host(int64_t value) override { return transport_.allreduce_max_host(value); }
  void barrier() override { transport_.barrier(); }
  AllreduceTimes take_allreduce_times() override { return transport_.take_allreduce_times(); }

 private:
  void stage(const ShardLayout& layout) {
    const size_t count = needed_staging_count(layout);
    if (count <= staging_count_) return;
    const CaptureState capture =
        capturing_ ? CaptureState::kCapturing : (captured_ ? CaptureState::kCaptured : CaptureState::kNone);
    require_buffer_may_grow(capture, "the sharded collectives' staging buffer (reserve_shard_staging)",
                            staging_count_ * sizeof(lowp16), count * sizeof(lowp16));
    staging_count_ = count;
  }

  Communicator& transport_;
  RecordingBackend& stream_;
  size_t staging_count_ = 0;
  bool capturing_ = false, captured_ = false;
};

}  // namespace ddp
