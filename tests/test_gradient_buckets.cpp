// test_gradient_buckets.cpp: the all-reduce buckets tile the flat gradient
// buffer exactly, in the order backward completes layers, with whole layers
// and the caps of the plan.
#include <gtest/gtest.h>

#include "trainer/gradient_buckets.h"

namespace ddp {
namespace {

size_t layer_count(const LinearSlices& s) { return static_cast<size_t>(s.in_features) * s.out_features + s.out_features; }

void expect_tiling(const ParameterLayout& layout, const std::vector<GradientBucket>& buckets) {
  size_t next = 0;
  int next_top_layer = static_cast<int>(layout.layers.size()) - 1;
  for (const GradientBucket& b : buckets) {
    EXPECT_EQ(b.offset, next);
    EXPECT_EQ(b.offset, layout.layers[next_top_layer].weight_offset);  // starts at a layer's W
    size_t sum = 0;
    for (int i = next_top_layer; i >= b.lowest_layer; --i) sum += layer_count(layout.layers[i]);
    EXPECT_EQ(b.count, sum);  // whole layers from next_top_layer down to lowest_layer
    next += b.count;
    next_top_layer = b.lowest_layer - 1;
  }
  EXPECT_EQ(next, layout.total_count);
  EXPECT_EQ(next_top_layer, -1);
}

TEST(GradientBuckets, SmallFirstBucketThenCapsOfWholeLayers) {
  // Layer sizes (elements, FP16): L3 10*64+10=650, L2 64*64+64=4160,
  // L1 4160, L0 32*64+64=2112. First cap 1000 B (500 elements), then 10000 B.
  const ParameterLayout layout = ParameterLayout::for_mlp({32, 64, 64, 64, 10});
  const auto b = plan_gradient_buckets(layout, 10000, 1000);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].lowest_layer, 3);  // 650 elements >= 500: closed after the last layer alone
  EXPECT_EQ(b[1].lowest_layer, 1);  // 4160 + 4160 = 8320 elements = 16640 B >= 10000
  EXPECT_EQ(b[2].lowest_layer, 0);  // the rest
  expect_tiling(layout, b);
}

TEST(GradientBuckets, ZeroMeansOneBucketAndHugeLayersStandAlone) {
  const ParameterLayout layout = ParameterLayout::for_mlp({784, 1024, 1024, 10});
  const auto one = plan_gradient_buckets(layout, 0, 1 << 20);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].lowest_layer, 0);
  expect_tiling(layout, one);
  const auto tiny = plan_gradient_buckets(layout, 1, 1);  // every layer exceeds the cap: one bucket each
  ASSERT_EQ(tiny.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(tiny[i].lowest_layer, 2 - i);
  expect_tiling(layout, tiny);
}

}  // namespace
}  // namespace ddp
