// test_shard_layout.cpp: the balanced shard layout's promises (coverage in
// rank order, alignment, balance within one unit) over random counts,
// including 0, 1 and primes, for A = 1 and A = 64 and worlds of 1 to 8;
// closed-form small layouts; and slices (a bucket's share of each range).
#include <gtest/gtest.h>

#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "comm/shard_layout.h"
#include "kernels/error.h"
#include "support/test_support.h"

namespace ddp {

// gtest's failure messages: "[begin, end)".
void PrintTo(const ShardRange& r, std::ostream* os) { *os << "[" << r.begin << ", " << r.end << ")"; }

namespace {

// Every property of a balanced layout that callers rely on, as one message
// per violation ("" when none).
std::string balanced_violations(size_t total, int world, size_t align) {
  std::string bad;
  const auto note = [&](const std::string& what) { bad += what + "; "; };
  const ShardLayout layout = ShardLayout::balanced(total, world, align);
  if (layout.world_size() != world) note("world " + std::to_string(layout.world_size()));
  if (layout.total_count() != total) note("total " + std::to_string(layout.total_count()));
  size_t expected_begin = 0, shortest = total, longest = 0;
  for (int r = 0; r < world; ++r) {
    const ShardRange got = layout.range(r);
    if (!(got == balanced_shard_range(total, world, align, r)))
      note("range(" + std::to_string(r) + ") != free function");
    if (got.begin != expected_begin) note("rank " + std::to_string(r) + " begins at " + std::to_string(got.begin));
    if (got.end < got.begin) note("rank " + std::to_string(r) + " ends before it begins");
    if (got.begin % align != 0) note("rank " + std::to_string(r) + " begin unaligned");
    if (r + 1 < world && got.count() % align != 0) note("rank " + std::to_string(r) + " length not a multiple of A");
    shortest = std::min(shortest, got.count());
    longest = std::max(longest, got.count());
    expected_begin = got.end;
  }
  if (expected_begin != total) note("ranges end at " + std::to_string(expected_begin));
  if (longest - shortest > align) note("lengths differ by " + std::to_string(longest - shortest));
  if (layout.max_range_count() != longest) note("max_range_count " + std::to_string(layout.max_range_count()));
  if (layout.is_uniform() != (longest * world == total)) note("is_uniform wrong");
  return bad;
}

TEST(ShardLayout, BalancedLayoutsCoverInOrderAlignedAndWithinOneUnit) {
  std::mt19937_64 rng(test::test_seed());
  std::vector<size_t> counts = {0, 1, 2, 3, 7, 63, 64, 65, 127, 128, 129, 511, 8191, 65521, 1000003};
  for (int i = 0; i < 200; ++i) counts.push_back(rng() % 100000);
  for (int i = 0; i < 20; ++i) counts.push_back(rng() % (size_t{1} << 40));  // beyond int
  for (size_t align : {size_t{1}, size_t{64}, size_t{7}})
    for (int world = 1; world <= 8; ++world)
      for (size_t total : counts)
        ASSERT_EQ(balanced_violations(total, world, align), "")
            << "count " << total << ", world " << world << ", A " << align << ", seed " << test::test_seed();
}

std::vector<ShardRange> ranges_of(const ShardLayout& layout) {
  std::vector<ShardRange> out;
  for (int r = 0; r < layout.world_size(); ++r) out.push_back(layout.range(r));
  return out;
}
using R = ShardRange;

TEST(ShardLayout, ClosedFormSmallCases) {
  // 10 elements, A = 1, 3 ranks: 3 / 3 / 4 units, the extra to the last rank.
  EXPECT_EQ(ranges_of(ShardLayout::balanced(10, 3, 1)), (std::vector<R>{{0, 3}, {3, 6}, {6, 10}}));
  // 11 elements, A = 1, 3 ranks: the two extras to the last two ranks.
  EXPECT_EQ(ranges_of(ShardLayout::balanced(11, 3, 1)), (std::vector<R>{{0, 3}, {3, 7}, {7, 11}}));
  // 200 elements, A = 64, 2 ranks: 4 units (the last one 8 long), 2 each.
  EXPECT_EQ(ranges_of(ShardLayout::balanced(200, 2, 64)), (std::vector<R>{{0, 128}, {128, 200}}));
  // 130 elements, A = 64, 2 ranks: 3 units, rank 1 gets 2 (the short one).
  EXPECT_EQ(ranges_of(ShardLayout::balanced(130, 2, 64)), (std::vector<R>{{0, 64}, {64, 130}}));
  // Fewer units than ranks: the first ranks are empty.
  EXPECT_EQ(ranges_of(ShardLayout::balanced(1, 4, 64)), (std::vector<R>{{0, 0}, {0, 0}, {0, 0}, {0, 1}}));
  EXPECT_EQ(ranges_of(ShardLayout::balanced(2, 4, 1)), (std::vector<R>{{0, 0}, {0, 0}, {0, 1}, {1, 2}}));
  EXPECT_EQ(ranges_of(ShardLayout::balanced(0, 3, 64)), (std::vector<R>{{0, 0}, {0, 0}, {0, 0}}));
  EXPECT_EQ(ShardLayout::balanced(130, 2, 64).max_range_count(), 66u);
  EXPECT_TRUE(ShardLayout::balanced(256, 4, 64).is_uniform());
  EXPECT_FALSE(ShardLayout::balanced(255, 4, 64).is_uniform());
}

TEST(ShardLayout, SliceIntersectsEveryRangeWithTheBucket) {
  const ShardLayout layout({0, 10, 10, 25, 40});  // rank 1 empty
  EXPECT_EQ(ranges_of(layout.slice(5, 30)), (std::vector<R>{{0, 5}, {5, 5}, {5, 20}, {20, 30}}));
  EXPECT_EQ(ranges_of(layout.slice(12, 3)), (std::vector<R>{{0, 0}, {0, 0}, {0, 3}, {3, 3}}));
  EXPECT_EQ(layout.slice(0, 40), layout);
  EXPECT_EQ(layout.slice(40, 0).total_count(), 0u);
  // Random slices of random balanced layouts: every element keeps its owner.
  std::mt19937_64 rng(test::test_seed());
  for (int trial = 0; trial < 200; ++trial) {
    const int world = 1 + static_cast<int>(rng() % 8);
    const size_t total = rng() % 3000, offset = rng() % (total + 1), count = rng() % (total - offset + 1);
    const ShardLayout whole = ShardLayout::balanced(total, world, 1 + rng() % 70);
    const ShardLayout part = whole.slice(offset, count);
    ASSERT_EQ(part.total_count(), count);
    ASSERT_EQ(part.world_size(), world);
    for (int r = 0; r < world; ++r)
      for (size_t i = part.range(r).begin; i < part.range(r).end; ++i) {
        const ShardRange owner = whole.range(r);
        ASSERT_TRUE(offset + i >= owner.begin && offset + i < owner.end)
            << "element " << i << " of slice (" << offset << ", " << count << ") on rank " << r << ", seed "
            << test::test_seed();
      }
  }
}

TEST(ShardLayout, RefusesImpossibleLayouts) {
  EXPECT_THROW(ShardLayout::balanced(10, 0, 64), Error);
  EXPECT_THROW(ShardLayout::balanced(10, 2, 0), Error);
  EXPECT_THROW(balanced_shard_range(10, 2, 1, 2), Error);
  EXPECT_THROW(ShardLayout({0}), Error);
  EXPECT_THROW(ShardLayout({1, 5}), Error);
  EXPECT_THROW(ShardLayout({0, 5, 3}), Error);
  EXPECT_THROW(ShardLayout({0, 5}).slice(3, 3), Error);
  EXPECT_THROW(ShardLayout({0, 5}).range(1), Error);
}

}  // namespace
}  // namespace ddp
