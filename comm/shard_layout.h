// shard_layout.h: how a flat buffer of `total_count` elements is cut into one
// contiguous range per rank, for sharded (ZeRO) state and the collectives
// that move it (Communicator::reduce_scatter_sum_lowp, allgather_lowp).
//
// Ranges lie in rank order and cover [0, total_count) exactly: rank r owns
// [bounds[r], bounds[r + 1]). A layout is either balanced (whole alignment
// units dealt out, see balanced_shard_range) or a slice of one (a gradient
// bucket's share of each rank's range), whose ranges need be neither
// aligned nor balanced. Counts are elements, never bytes.
#pragma once

#include <cstddef>
#include <vector>

namespace ddp {

struct ShardRange {
  size_t begin = 0, end = 0;  // elements, [begin, end)
  size_t count() const { return end - begin; }
  bool operator==(const ShardRange& o) const { return begin == o.begin && end == o.end; }
};

// Rank `rank`'s range of a balanced layout: the count is cut into units of
// `align_elements` (the last unit may be short) and every rank gets
// floor(units / world) or one more; the ranks with one more are the last
// ones, which also hold the short unit, so every range is a multiple of
// align_elements long except the last rank's, and any two ranges differ by
// at most align_elements elements. No divisibility is required of anything.
// With fewer units than ranks the first ranks get empty ranges (begin ==
// end == 0): a count of 1 belongs to the last rank. Throws ddp::Error for a
// world below 1, a rank outside it or an alignment of 0.
ShardRange balanced_shard_range(size_t total_count, int world_size, size_t align_elements, int rank);

class ShardLayout {
 public:
  // Every rank's balanced_shard_range.
  static ShardLayout balanced(size_t total_count, int world_size, size_t align_elements);
  // From explicit boundaries (world_size + 1 of them, from 0, non-decreasing);
  // throws ddp::Error otherwise.
  explicit ShardLayout(std::vector<size_t> bounds);

  int world_size() const { return static_cast<int>(bounds_.size()) - 1; }
  size_t total_count() const { return bounds_.back(); }
  ShardRange range(int rank) const;  // throws for a rank outside the world
  // The longest range: the per-rank count of collectives that need equal
  // counts on every rank (NCCL), which pad every range to it.
  size_t max_range_count() const;
  // Whether every range is max_range_count() long (total = world x max), so
  // equal-count collectives need no padding.
  bool is_uniform() const { return max_range_count() * static_cast<size_t>(world_size()) == total_count(); }
  // The layout of the sub-buffer [offset, offset + count) (a bucket): each
  // rank's range intersected with it, shifted to start at 0. Throws when the
  // sub-buffer leaves [0, total_count()).
  ShardLayout slice(size_t offset, size_t count) const;

  bool operator==(const ShardLayout& o) const { return bounds_ == o.bounds_; }
  bool operator!=(const ShardLayout& o) const { return !(*this == o); }

 private:
  std::vector<size_t> bounds_;  // world_size + 1 boundaries, bounds_[0] == 0
};

}  // namespace ddp
