// nccl_shard_collectives.cpp: NcclCommunicator's reduce-scatter, all-gather
// and device MAX all-reduce (the header's "Sharded collectives").
//
// A uniform layout is NCCL's own (rank q's part at q x count) and runs on the
// caller's buffers. An uneven one (any count, any world) goes through the
// padded plan of comm/padded_collectives.h, with device-to-device copies and
// the NCCL collective all on comm_stream, in a staging buffer that is grown
// on demand (zeroed once, so padding is at least initialised) and kept, or
// reserved ahead for a run that captures (reserve_shard_staging).
#include <cstddef>
#include <utility>

#include "comm/nccl_check.h"
#include "comm/nccl_communicator.h"
#include "comm/padded_collectives.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/error.h"
#include "kernels/graph_safe_growth.h"

namespace ddp {
namespace {

// Stream-ordered device-to-device copies of 16-bit or FP32 elements.
struct CopyOnStream {
  cudaStream_t stream;
  template <class T>
  void operator()(T* dst, const T* src, size_t count) const {
    if (count == 0 || dst == src) return;
    DDP_CUDA_CHECK(cudaMemcpyAsync(dst, src, count * sizeof(T), cudaMemcpyDeviceToDevice, stream));
  }
};

}  // namespace

lowp16* NcclCommunicator::staging_lowp(size_t count) {
  if (count <= staging_count_) return static_cast<lowp16*>(staging_.get());
  // A captured graph holds the old address, and a capture cannot wait for
  // the stream: the graph-safe growth rule, as for the backend's scratch.
  const CaptureState capture =
      capturing_ ? CaptureState::kCapturing : (captured_ ? CaptureState::kCaptured : CaptureState::kNone);
  require_buffer_may_grow(capture, "the sharded collectives' staging buffer (reserve_shard_staging)",
                          staging_count_ * sizeof(lowp16), count * sizeof(lowp16));
  // Started collectives may still read the old buffer.
  DDP_CUDA_CHECK(cudaStreamSynchronize(comm_stream()));
  staging_.reset();
  staging_count_ = 0;
  UniqueDeviceMemory grown = cuda_malloc_unique(count * sizeof(lowp16));
  DDP_CUDA_CHECK(cudaMemsetAsync(grown.get(), 0, count * sizeof(lowp16), comm_stream()));
  staging_ = std::move(grown);
  staging_count_ = count;
  return static_cast<lowp16*>(staging_.get());
}

void NcclCommunicator::reserve_shard_staging(const ShardLayout& layout) {
  check_layout_world(*this, layout, "reserve_shard_staging");
  const size_t count = needed_staging_count(layout);
  if (count > 0) staging_lowp(count);
}

void NcclCommunicator::start_reduce_scatter_sum_lowp(const lowp16* send, lowp16* recv, const ShardLayout& layout) {
  check_layout_world(*this, layout, "reduce_scatter_sum_lowp");
  const ShardRange mine = layout.range(shard_rank_);
  shard_call_in_place(send, layout.total_count(), recv, mine.begin, mine.count(), "reduce_scatter_sum_lowp");
  const bool direct = layout.is_uniform();  // NCCL's own layout; in place is NCCL's in place too
  // Before the gate: growing may wait for comm_stream.
  lowp16* staging = direct ? nullptr : staging_lowp(needed_staging_count(layout));
  const AbortGate::Pass pass = gate_.enter("reduce_scatter_sum_lowp");
  if (layout.total_count() == 0) return;  // the same layout on every rank, so all skip
  const CollectiveTiming timing = begin_collective("reduce-scatter", layout.total_count());
  const auto nccl_reduce_scatter = [this](const lowp16* padded_send, lowp16* out, size_t per_rank) {
    DDP_NCCL_CHECK(ncclReduceScatter(padded_send, out, per_rank, lowp_type_, ncclSum, shard_comm(), comm_stream()));
  };
  if (direct) {
    nccl_reduce_scatter(send, recv, layout.max_range_count());
  } else {
    padded_reduce_scatter(send, recv, layout, shard_rank_, staging, CopyOnStream{comm_stream()}, nccl_reduce_scatter);
  }
  // Every replica has the same place in its group, so the same count.
  if (replica_comm_ != nullptr && mine.count() > 0)
    DDP_NCCL_CHECK(ncclAllReduce(recv, recv, mine.count(), lowp_type_, ncclSum, replica_comm_, comm_stream()));
  end_collective(timing);
}

// As start_reduce_scatter_sum_lowp in ncclFloat32; an uneven layout's
// staging holds twice the 16-bit words (reserve_shard_staging's gathers of
// FP32 state already need that much).
void NcclCommunicator::start_reduce_scatter_sum_fp32(const float* send, float* recv, const ShardLayout& layout) {
  check_layout_world(*this, layout, "reduce_scatter_sum_fp32");
  const ShardRange mine = layout.range(shard_rank_);
  shard_call_in_place(send, layout.total_count(), recv, mine.begin, mine.count(), "reduce_scatter_sum_fp32");
  const bool direct = layout.is_uniform();
  float* staging = direct ? nullptr : reinterpret_cast<float*>(staging_lowp(2 * needed_staging_count(layout)));
  const AbortGate::Pass pass = gate_.enter("reduce_scatter_sum_fp32");
  if (layout.total_count() == 0) return;
  const CollectiveTiming timing = begin_collective("reduce-scatter", layout.total_count(), sizeof(float));
  const auto nccl_reduce_scatter = [this](const float* padded_send, float* out, size_t per_rank) {
    DDP_NCCL_CHECK(ncclReduceScatter(padded_send, out, per_rank, ncclFloat32, ncclSum, shard_comm(), comm_stream()));
  };
  if (direct) {
    nccl_reduce_scatter(send, recv, layout.max_range_count());
  } else {
    padded_reduce_scatter(send, recv, layout, shard_rank_, staging, CopyOnStream{comm_stream()}, nccl_reduce_scatter);
  }
  if (replica_comm_ != nullptr && mine.count() > 0)
    DDP_NCCL_CHECK(ncclAllReduce(recv, recv, mine.count(), ncclFloat32, ncclSum, replica_comm_, comm_stream()));
  end_collective(timing);
}

void NcclCommunicator::start_allgather_lowp(const lowp16* mine, lowp16* full, const ShardLayout& layout) {
  check_layout_world(*this, layout, "allgather_lowp");
  const ShardRange own = layout.range(shard_rank_);
  shard_call_in_place(full, layout.total_count(), mine, own.begin, own.count(), "allgather_lowp");
  const bool direct = layout.is_uniform();
  lowp16* staging = direct ? nullptr : staging_lowp(needed_staging_count(layout));
  const AbortGate::Pass pass = gate_.enter("allgather_lowp");
  if (layout.total_count() == 0) return;
  const CollectiveTiming timing = begin_collective("all-gather", layout.total_count());
  const auto nccl_allgather = [this](const lowp16* padded_mine, lowp16* out, size_t per_rank) {
    DDP_NCCL_CHECK(ncclAllGather(padded_mine, out, per_rank, lowp_type_, shard_comm(), comm_stream()));
  };
  if (direct) {
    nccl_allgather(mine, full, layout.max_range_count());
  } else {
    padded_allgather(mine, full, layout, shard_rank_, staging, CopyOnStream{comm_stream()}, nccl_allgather);
  }
  end_collective(timing);
}

void NcclCommunicator::reduce_scatter_sum_lowp(const lowp16* send, lowp16* recv, const ShardLayout& layout) {
  start_reduce_scatter_sum_lowp(send, recv, layout);
  wait_allreduces();
}

void NcclCommunicator::allgather_lowp(const lowp16* mine, lowp16* full, const ShardLayout& layout) {
  start_allgather_lowp(mine, full, layout);
  wait_allreduces();
}

// The compute stream's wait also covers any started collective before it
// (one stream), but those stay pending for wait_allreduces' timing.
void NcclCommunicator::allreduce_max_int32(int32_t* data, size_t count) {
  const AbortGate::Pass pass = gate_.enter("allreduce_max_int32");
  if (count == 0) return;
  comm_waits_for_compute();
  DDP_NCCL_CHECK(ncclAllReduce(data, data, count, ncclInt32, ncclMax, comm_, comm_stream()));
  compute_waits_for_comm();
}

}  // namespace ddp
