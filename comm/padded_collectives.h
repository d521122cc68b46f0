// padded_collectives.h: a reduce-scatter and an all-gather over an uneven
// ShardLayout, made of an equal-count collective (NCCL's ncclReduceScatter
// and ncclAllGather move the same count per rank, rank q's part at q x that
// count). Every range gets a slot of padded_slot_count(layout) elements in
// a staging buffer; a range shorter than its slot leaves padding, which is
// summed or gathered like the rest and then dropped, so its values never
// matter. Every rank derives the same slot from the same layout.
//
// Written once over two callables, so the NCCL communicator (device copies
// and NCCL on comm_stream) and the CPU tests (memcpy and MPI) run the same
// plan: copy(dst, src, count) moves `count` elements (16-bit words, or the
// FP32 sums of --grad-reduce-dtype fp32: the element type T); the
// collective takes (send, recv, per-rank count) with NCCL's buffer layout. Both are
// queued in call order (one stream, or a host thread), so the plan needs no
// waits of its own.
#pragma once

#include <cstddef>

#include "comm/shard_layout.h"
#include "kernels/half.h"

namespace ddp {

// Slots start on 128-byte boundaries of 16-bit words (256-byte ones of FP32).
constexpr size_t kPaddedSlotAlignElements = 64;

// The longest range, rounded up to kPaddedSlotAlignElements.
inline size_t padded_slot_count(const ShardLayout& layout) {
  const size_t longest = layout.max_range_count();
  return (longest + kPaddedSlotAlignElements - 1) / kPaddedSlotAlignElements * kPaddedSlotAlignElements;
}
// Elements of staging the two plans below need: world + 1 slots.
inline size_t padded_staging_count(const ShardLayout& layout) {
  return (static_cast<size_t>(layout.world_size()) + 1) * padded_slot_count(layout);
}
// Elements of staging an equal-count transport (NCCL) needs for a
// collective over `layout`: none for a uniform layout, which runs on the
// caller's buffers (an empty one is uniform too), else the plan's. The
// NCCL communicator sizes its staging by this, and so do the CPU tests
// that emulate it.
inline size_t needed_staging_count(const ShardLayout& layout) {
  return layout.is_uniform() ? 0 : padded_staging_count(layout);
}

// Rank `rank`'s part of the sum: send (total_count) -> recv (its range).
// In place (recv == send + its begin) works too: every copy out of send is
// queued before the collective writes anything.
template <class T, class Copy, class EqualReduceScatter>
void padded_reduce_scatter(const T* send, T* recv, const ShardLayout& layout, int rank, T* staging, Copy&& copy,
                           EqualReduceScatter&& reduce_scatter) {
  const size_t slot = padded_slot_count(layout);
  if (slot == 0) return;
  const size_t world = static_cast<size_t>(layout.world_size());
  T* padded_send = staging;                 // (world, slot)
  T* padded_recv = staging + world * slot;  // (slot)
  for (int q = 0; q < layout.world_size(); ++q) {
    const ShardRange range = layout.range(q);
    if (range.count() > 0) copy(padded_send + static_cast<size_t>(q) * slot, send + range.begin, range.count());
  }
  const size_t mine = layout.range(rank).count();
  T* out = mine == slot ? recv : padded_recv;  // a full slot lands in place
  reduce_scatter(static_cast<const T*>(padded_send), out, slot);
  if (out != recv && mine > 0) copy(recv, static_cast<const T*>(padded_recv), mine);
}

// Every rank's range of `full`, from each rank's `mine` (its range's count).
// In place (mine == full + its begin) works too.
template <class Copy, class EqualAllgather>
void padded_allgather(const lowp16* mine, lowp16* full, const ShardLayout& layout, int rank, lowp16* staging,
                      Copy&& copy, EqualAllgather&& allgather) {
  const size_t slot = padded_slot_count(layout);
  if (slot == 0) return;
  lowp16* padded_mine = staging;         // (slot)
  lowp16* padded_full = staging + slot;  // (world, slot)
  const size_t own = layout.range(rank).count();
  const lowp16* src = mine;
  if (own != slot) {  // a short range: its slot's tail is padding
    if (own > 0) copy(padded_mine, mine, own);
    src = padded_mine;
  }
  allgather(src, padded_full, slot);
  for (int q = 0; q < layout.world_size(); ++q) {
    const ShardRange range = layout.range(q);
    if (range.count() > 0)
      copy(full + range.begin, static_cast<const lowp16*>(padded_full + static_cast<size_t>(q) * slot), range.count());
  }
}

}  // namespace ddp
