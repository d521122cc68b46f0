// test_schedule_sampler.cpp: LR schedules and DistributedSampler semantics.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "trainer/data/distributed_sampler.h"
#include "trainer/optim/lr_schedule.h"

namespace ddp {
namespace {

TEST(LrSchedule, CosineWithWarmup) {
  LrSchedule s;
  s.kind = LrScheduleKind::Cosine;
  s.base_lr = 0.1;
  s.total_steps = 110;
  s.warmup_steps = 10;
  EXPECT_DOUBLE_EQ(s.lr_at(0), 0.01);
  EXPECT_DOUBLE_EQ(s.lr_at(9), 0.1);
  EXPECT_DOUBLE_EQ(s.lr_at(10), 0.1);
  EXPECT_NEAR(s.lr_at(60), 0.05, 1e-12);  // half-way through the cosine
  EXPECT_NEAR(s.lr_at(109), 0.1 * 0.5 * (1 + std::cos(M_PI * 99 / 100)), 1e-15);
}

TEST(LrSchedule, StepAndConstant) {
  LrSchedule s;
  s.kind = LrScheduleKind::Step;
  s.base_lr = 1.0;
  s.total_steps = 90;
  s.step_size = 30;
  s.gamma = 0.1;
  EXPECT_DOUBLE_EQ(s.lr_at(29), 1.0);
  EXPECT_NEAR(s.lr_at(30), 0.1, 1e-15);
  EXPECT_NEAR(s.lr_at(89), 0.01, 1e-15);
  s.kind = LrScheduleKind::Constant;
  EXPECT_DOUBLE_EQ(s.lr_at(89), 1.0);
}

TEST(DistributedSampler, RanksPartitionAPaddedPermutation) {
  const size_t n = 103;
  const int world = 4;
  std::multiset<uint32_t> seen;
  for (int r = 0; r < world; ++r) {
    DistributedSampler s(n, r, world, 7, true, false);
    const auto idx = s.rank_indices(3);
    EXPECT_EQ(idx.size(), 26u);  // ceil(103 / 4)
    seen.insert(idx.begin(), idx.end());
  }
  EXPECT_EQ(seen.size(), 104u);
  for (uint32_t i = 0; i < n; ++i) EXPECT_GE(seen.count(i), 1u) << i;  // every sample, one padded twice
}

// PyTorch DistributedSampler semantics for N = 1..4 and sizes that do not
// divide by N: the ranks' indices of an epoch together hold every sample
// once, plus padding repeated from the start of the epoch order (or, with
// drop_last, all but the tail, each at most once).
TEST(DistributedSampler, RanksCoverTheEpochExactlyOnceForAnyWorldSize) {
  for (size_t n : {1u, 5u, 7u, 100u, 1001u}) {
    for (int world = 1; world <= 4; ++world) {
      for (bool drop_last : {false, true}) {
        if (drop_last && n < static_cast<size_t>(world)) continue;  // refused: no sample for some rank
        SCOPED_TRACE("n " + std::to_string(n) + " world " + std::to_string(world) + " drop_last " +
                     std::to_string(drop_last));
        const size_t per_rank = drop_last ? n / world : (n + world - 1) / world;
        const auto order = epoch_permutation(n, 11, 2);
        std::vector<int> count(n, 0);
        for (int r = 0; r < world; ++r) {
          const auto idx = DistributedSampler(n, r, world, 11, true, drop_last).rank_indices(2);
          ASSERT_EQ(idx.size(), per_rank);
          for (uint32_t i : idx) {
            ASSERT_LT(i, n);
            ++count[i];
          }
        }
        const size_t total = per_rank * world;
        for (size_t j = 0; j < n; ++j) {
          // Padded position k (0 <= k < total) takes order[k mod n]: position
          // j is used once per k = j, j + n, ... below total.
          const int want = j < total ? static_cast<int>((total - 1 - j) / n + 1) : 0;
          EXPECT_EQ(count[order[j]], want) << "position " << j;
        }
      }
    }
  }
}

TEST(DistributedSampler, StridedOverTheSameOrderForAnyWorldSize) {
  // Position j*N + r of the epoch order belongs to rank r: with a world of
  // one, rank r of N sees every N-th element of the single-rank order.
  const size_t n = 64;
  const auto all = DistributedSampler(n, 0, 1, 42, true, false).rank_indices(5);
  for (int world : {2, 4}) {
    for (int r = 0; r < world; ++r) {
      const auto mine = DistributedSampler(n, r, world, 42, true, false).rank_indices(5);
      for (size_t j = 0; j < mine.size(); ++j) EXPECT_EQ(mine[j], all[j * world + r]);
    }
  }
}

TEST(DistributedSampler, EpochsDifferAndSeedsReproduce) {
  const auto a = epoch_permutation(1000, 1, 0), b = epoch_permutation(1000, 1, 1), c = epoch_permutation(1000, 1, 0);
  EXPECT_NE(a, b);
  EXPECT_EQ(a, c);
  auto sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (uint32_t i = 0; i < 1000; ++i) EXPECT_EQ(sorted[i], i);
}

TEST(DistributedSampler, DropLastAndNoShuffle) {
  DistributedSampler s(10, 1, 3, 0, false, true);
  EXPECT_EQ(s.samples_per_rank(), 3u);
  EXPECT_EQ(s.rank_indices(0), (std::vector<uint32_t>{1, 4, 7}));
}

}  // namespace
}  // namespace ddp
