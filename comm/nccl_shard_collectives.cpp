// nccl_shard_collectives.cpp: NcclCommunicator's reduce-scatter, all-gather
// and device MAX all-reduce (the header's "Sharded collectives").
//
// ncclReduceScatter and ncclAllGather move recvcount / sendcount elements
// per rank, the same on every rank, with rank q's part at q x that count of
// the full buffer. A uniform layout is exactly that; an uneven one (any
// count, any world) is padded: every range gets a slot of `slot` elements
// (the longest range rounded up to 64 elements, so slots start on 128-byte
// boundaries), copied into and out of a staging buffer on comm_stream.
// Padding elements are summed and gathered like the rest and then dropped,
// so their values never matter (the buffer is zeroed once, so they are at
// least initialised). Every rank derives the same slot from the same
// layout. Staging: (world + 1) x slot elements, grown on demand, kept.
#include <cstddef>
#include <string>
#include <utility>

#include "comm/nccl_check.h"
#include "comm/nccl_communicator.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/error.h"

namespace ddp {
namespace {

constexpr size_t kSlotAlignElements = 64;  // 128 bytes of FP16

size_t padded_slot(const ShardLayout& layout) {
  const size_t longest = layout.max_range_count();
  return (longest + kSlotAlignElements - 1) / kSlotAlignElements * kSlotAlignElements;
}

// Stream-ordered device-to-device copy of `count` FP16 elements.
void copy_fp16_on(cudaStream_t stream, half16* dst, const half16* src, size_t count) {
  if (count == 0 || dst == src) return;
  DDP_CUDA_CHECK(cudaMemcpyAsync(dst, src, count * sizeof(half16), cudaMemcpyDeviceToDevice, stream));
}

}  // namespace

half16* NcclCommunicator::staging_fp16(size_t count) {
  if (count <= staging_count_) return static_cast<half16*>(staging_.get());
  // A captured graph holds the old address, and a capture cannot wait for
  // the stream: the first uncaptured step must have sized the buffer.
  DDP_REQUIRE(!capturing_ && !captured_,
              "the sharded collectives' staging buffer must grow to " + std::to_string(count) +
                  " FP16 elements after a CUDA graph captured them; run the step once uncaptured first");
  // Started collectives may still read the old buffer.
  DDP_CUDA_CHECK(cudaStreamSynchronize(comm_stream()));
  staging_.reset();
  staging_count_ = 0;
  UniqueDeviceMemory grown = cuda_malloc_unique(count * sizeof(half16));
  DDP_CUDA_CHECK(cudaMemsetAsync(grown.get(), 0, count * sizeof(half16), comm_stream()));
  staging_ = std::move(grown);
  staging_count_ = count;
  return static_cast<half16*>(staging_.get());
}

void NcclCommunicator::start_reduce_scatter_sum_fp16(const half16* send, half16* recv, const ShardLayout& layout) {
  check_layout_world(*this, layout, "reduce_scatter_sum_fp16");
  const ShardRange mine = layout.range(rank_);
  shard_call_in_place(send, layout.total_count(), recv, mine.begin, mine.count(), "reduce_scatter_sum_fp16");
  const bool direct = layout.is_uniform();  // NCCL's own layout; in place is NCCL's in place too
  const size_t slot = direct ? layout.max_range_count() : padded_slot(layout);
  const size_t world = static_cast<size_t>(world_size_);
  half16* staging = direct || slot == 0 ? nullptr : staging_fp16((world + 1) * slot);  // before the gate: may wait
  const AbortGate::Pass pass = gate_.enter("reduce_scatter_sum_fp16");
  if (layout.total_count() == 0) return;  // the same layout on every rank, so all skip
  const cudaEvent_t busy_end = begin_collective();
  if (direct) {
    DDP_NCCL_CHECK(ncclReduceScatter(send, recv, slot, ncclFloat16, ncclSum, comm_, comm_stream()));
  } else {
    half16* padded_send = staging;                 // (world, slot)
    half16* padded_recv = staging + world * slot;  // (slot)
    for (int q = 0; q < world_size_; ++q) {
      const ShardRange range = layout.range(q);
      copy_fp16_on(comm_stream(), padded_send + static_cast<size_t>(q) * slot, send + range.begin, range.count());
    }
    // The copies are queued first, so writing recv directly is safe in place too.
    half16* out = mine.count() == slot ? recv : padded_recv;
    DDP_NCCL_CHECK(ncclReduceScatter(padded_send, out, slot, ncclFloat16, ncclSum, comm_, comm_stream()));
    if (out != recv) copy_fp16_on(comm_stream(), recv, padded_recv, mine.count());
  }
  end_collective(busy_end);
}

void NcclCommunicator::start_allgather_fp16(const half16* mine, half16* full, const ShardLayout& layout) {
  check_layout_world(*this, layout, "allgather_fp16");
  const ShardRange own = layout.range(rank_);
  shard_call_in_place(full, layout.total_count(), mine, own.begin, own.count(), "allgather_fp16");
  const bool direct = layout.is_uniform();
  const size_t slot = direct ? layout.max_range_count() : padded_slot(layout);
  const size_t world = static_cast<size_t>(world_size_);
  half16* staging = direct || slot == 0 ? nullptr : staging_fp16((world + 1) * slot);
  const AbortGate::Pass pass = gate_.enter("allgather_fp16");
  if (layout.total_count() == 0) return;
  const cudaEvent_t busy_end = begin_collective();
  if (direct) {
    DDP_NCCL_CHECK(ncclAllGather(mine, full, slot, ncclFloat16, comm_, comm_stream()));
  } else {
    half16* padded_mine = staging;         // (slot)
    half16* padded_full = staging + slot;  // (world, slot)
    const half16* src = mine;
    if (own.count() != slot) {  // a short range: its slot's tail is padding
      copy_fp16_on(comm_stream(), padded_mine, mine, own.count());
      src = padded_mine;
    }
    DDP_NCCL_CHECK(ncclAllGather(src, padded_full, slot, ncclFloat16, comm_, comm_stream()));
    for (int q = 0; q < world_size_; ++q) {
      const ShardRange range = layout.range(q);
      copy_fp16_on(comm_stream(), full + range.begin, padded_full + static_cast<size_t>(q) * slot, range.count());
    }
  }
  end_collective(busy_end);
}

void NcclCommunicator::reduce_scatter_sum_fp16(const half16* send, half16* recv, const ShardLayout& layout) {
  start_reduce_scatter_sum_fp16(send, recv, layout);
  wait_allreduces();
}

void NcclCommunicator::allgather_fp16(const half16* mine, half16* full, const ShardLayout& layout) {
  start_allgather_fp16(mine, full, layout);
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
