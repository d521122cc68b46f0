// test_zero_staging.cpp: the staging a --zero run reserves before it
// captures its step (train_step_shards.cpp), without a GPU. An
// equal-count transport (NCCL) needs staging for uneven layouts only
// (needed_staging_count, comm/padded_collectives.h); the FP32-state gather
// layout (fp32_state_gather_layout, sharded_state.h: the ranges twice as
// long) needs the most of any layout a --zero run moves, so reserving it
// covers the step's collectives too, over random flat counts and worlds of
// 1 to 8. The run end to end: tests/mpi/mpi_test_zero_graphs.cpp.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "comm/padded_collectives.h"
#include "comm/shard_layout.h"
#include "support/test_support.h"
#include "trainer/zero/sharded_state.h"

namespace ddp {
namespace {

TEST(ZeroStaging, OnlyUnevenLayoutsNeedStaging) {
  EXPECT_EQ(needed_staging_count(ShardLayout::balanced(0, 3, 64)), 0u) << "empty";
  EXPECT_EQ(needed_staging_count(ShardLayout::balanced(4 * 128, 4, 64)), 0u) << "uniform";
  EXPECT_EQ(needed_staging_count(ShardLayout::balanced(1000, 1, 64)), 0u) << "one rank";
  const ShardLayout uneven({0, 64, 128, 130});
  ASSERT_FALSE(uneven.is_uniform());
  EXPECT_EQ(needed_staging_count(uneven), padded_staging_count(uneven));
  EXPECT_EQ(needed_staging_count(uneven), 4u * 64u);  // world + 1 slots of the longest range, 64
}

TEST(ZeroStaging, TheFp32GatherLayoutDoublesEveryRange) {
  const ShardLayout shards = zero_shard_layout(1000, 3);
  const ShardLayout pairs = fp32_state_gather_layout(shards);
  ASSERT_EQ(pairs.world_size(), 3);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(pairs.range(r).begin, 2 * shards.range(r).begin) << r;
    EXPECT_EQ(pairs.range(r).end, 2 * shards.range(r).end) << r;
  }
}

// Reserving the FP32 gather layout leaves nothing a --zero 1 step moves
// (the layout, its buckets' slices) needing more: the reservation is the
// run's largest need. An uneven layout's FP32 gathers need at least what
// the layout does (more once its longest range passes half a slot: the
// growth a capture used to refuse), a uniform one's none.
TEST(ZeroStaging, TheFp32GatherReservationCoversEveryLayoutOfTheRun) {
  std::mt19937_64 rng(test::test_seed());
  int checked_uneven = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const int world = 1 + static_cast<int>(rng() % 8);
    const size_t flat = rng() % 5 == 0 ? 64 * static_cast<size_t>(world) * (1 + rng() % 8) : rng() % 100000;
    const ShardLayout shards = zero_shard_layout(flat, world);
    const size_t reserved = needed_staging_count(fp32_state_gather_layout(shards));
    const std::string what = "flat " + std::to_string(flat) + ", world " + std::to_string(world);
    if (shards.is_uniform()) {
      EXPECT_EQ(reserved, 0u) << what << ": the gathers run on the caller's buffers";
      continue;
    }
    ++checked_uneven;
    EXPECT_GE(reserved, needed_staging_count(shards)) << what;
    for (int bucket = 0; bucket < 8; ++bucket) {
      const size_t offset = rng() % (flat + 1), count = rng() % (flat - offset + 1);
      EXPECT_LE(needed_staging_count(shards.slice(offset, count)), reserved)
          << what << ", bucket [" << offset << ", " << offset + count << ")";
    }
  }
  EXPECT_GT(checked_uneven, 100);
}

}  // namespace
}  // namespace ddp
