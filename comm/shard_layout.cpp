// shard_layout.cpp
#include "comm/shard_layout.h"

#include <algorithm>
#include <string>
#include <utility>

#include "kernels/error.h"

namespace ddp {

ShardRange balanced_shard_range(size_t total_count, int world_size, size_t align_elements, int rank) {
  DDP_REQUIRE(world_size >= 1, "a shard layout needs a world of at least 1 rank, not " + std::to_string(world_size));
  DDP_REQUIRE(rank >= 0 && rank < world_size,
              "rank " + std::to_string(rank) + " is outside a world of " + std::to_string(world_size));
  DDP_REQUIRE(align_elements >= 1, "a shard layout needs an alignment of at least 1 element");
  const size_t world = static_cast<size_t>(world_size);
  const size_t units = total_count / align_elements + (total_count % align_elements != 0);
  const size_t base = units / world, extra = units % world;
  // The `extra` ranks with one unit more are the last ones: the last rank
  // holds the short unit, so its range stays within one unit of the rest.
  const size_t first_with_extra = world - extra;
  const auto units_before = [&](size_t r) { return r * base + (r > first_with_extra ? r - first_with_extra : 0); };
  // units_before(r) < units means units_before(r) * align < total_count: no
  // overflow for any count.
  const auto element = [&](size_t u) { return u >= units ? total_count : u * align_elements; };
  const size_t r = static_cast<size_t>(rank);
  return {element(units_before(r)), element(units_before(r + 1))};
}

ShardLayout ShardLayout::balanced(size_t total_count, int world_size, size_t align_elements) {
  std::vector<size_t> bounds(1, 0);
  for (int r = 0; r < world_size; ++r)
    bounds.push_back(balanced_shard_range(total_count, world_size, align_elements, r).end);
  if (world_size < 1) balanced_shard_range(total_count, world_size, align_elements, 0);  // throws: no ranks
  return ShardLayout(std::move(bounds));
}

ShardLayout::ShardLayout(std::vector<size_t> bounds) : bounds_(std::move(bounds)) {
  DDP_REQUIRE(bounds_.size() >= 2, "a shard layout needs at least 2 boundaries (one rank)");
  DDP_REQUIRE(bounds_.front() == 0, "a shard layout's first range must start at 0");
  DDP_REQUIRE(std::is_sorted(bounds_.begin(), bounds_.end()),
              "a shard layout's ranges must lie in rank order without overlap");
}

ShardRange ShardLayout::range(int rank) const {
  DDP_REQUIRE(rank >= 0 && rank < world_size(),
              "rank " + std::to_string(rank) + " is outside a world of " + std::to_string(world_size()));
  const size_t r = static_cast<size_t>(rank);
  return {bounds_[r], bounds_[r + 1]};
}

size_t ShardLayout::max_range_count() const {
  size_t longest = 0;
  for (size_t r = 0; r + 1 < bounds_.size(); ++r) longest = std::max(longest, bounds_[r + 1] - bounds_[r]);
  return longest;
}

ShardLayout ShardLayout::slice(size_t offset, size_t count) const {
  DDP_REQUIRE(offset <= total_count() && count <= total_count() - offset,
              "slice [" + std::to_string(offset) + ", +" + std::to_string(count) + ") leaves a layout of " +
                  std::to_string(total_count()) + " elements");
  std::vector<size_t> bounds(bounds_.size());
  for (size_t i = 0; i < bounds_.size(); ++i) bounds[i] = std::clamp(bounds_[i], offset, offset + count) - offset;
  return ShardLayout(std::move(bounds));
}

}  // namespace ddp
