// test_single_process_shards.cpp: the sharded collectives of a world of one
// (SingleProcessCommunicator): the one range is the whole buffer, so a
// reduce-scatter and an all-gather are copies, bit for bit, through host
// memcpy or the backend's copy; in place they leave the data alone; the
// FP32 sums alike.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "comm/communicator.h"
#include "comm/shard_layout.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/error.h"
#include "support/test_support.h"

namespace ddp {
namespace {

bool same_bits(const std::vector<lowp16>& a, const std::vector<lowp16>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(lowp16)) == 0);
}

void expect_copies_every_bit(SingleProcessCommunicator& comm, std::mt19937_64& rng) {
  for (size_t count : {size_t{0}, size_t{1}, size_t{63}, size_t{100003}}) {
    const ShardLayout layout = ShardLayout::balanced(count, 1, 64);
    const std::vector<lowp16> want = test::random_halves(rng, count, -1000.0f, 1000.0f);
    std::vector<lowp16> got = test::poison_halves(count);
    comm.reduce_scatter_sum_lowp(want.data(), got.data(), layout);
    EXPECT_TRUE(same_bits(got, want)) << "reduce-scatter of " << count;
    got = test::poison_halves(count);
    comm.allgather_lowp(want.data(), got.data(), layout);
    EXPECT_TRUE(same_bits(got, want)) << "all-gather of " << count;
    std::vector<lowp16> in_place = want;
    comm.reduce_scatter_sum_lowp(in_place.data(), in_place.data(), layout);
    comm.allgather_lowp(in_place.data(), in_place.data(), layout);
    EXPECT_TRUE(same_bits(in_place, want)) << "in place, " << count;
    // The FP32 sums of --grad-reduce-dtype fp32: the same copies.
    const std::vector<float> want32 = test::random_floats(rng, count, -1000.0f, 1000.0f);
    std::vector<float> got32(count, std::nanf(""));
    comm.start_reduce_scatter_sum_fp32(want32.data(), got32.data(), layout);
    EXPECT_EQ(got32, want32) << "FP32 reduce-scatter of " << count;
    comm.start_allreduce_sum_fp32(got32.data(), count);
    comm.start_reduce_scatter_sum_fp32(got32.data(), got32.data(), layout);
    comm.wait_allreduces();
    EXPECT_EQ(got32, want32) << "FP32 sums in place, " << count;
  }
}

TEST(SingleProcessShards, CollectivesCopyEveryBitOnHostMemory) {
  std::mt19937_64 rng(test::test_seed());
  SingleProcessCommunicator comm;
  expect_copies_every_bit(comm, rng);
}

TEST(SingleProcessShards, CollectivesCopyThroughTheBackend) {
  std::mt19937_64 rng(test::test_seed());
  CpuBackend cpu(1);
  SingleProcessCommunicator comm(&cpu);
  expect_copies_every_bit(comm, rng);
}

TEST(SingleProcessShards, MaxOfOneRankKeepsTheFlagsAndAnotherWorldIsRefused) {
  SingleProcessCommunicator comm;
  std::vector<int32_t> flags = {0, 1, -5};
  comm.allreduce_max_int32(flags.data(), flags.size());
  EXPECT_EQ(flags, (std::vector<int32_t>{0, 1, -5}));
  std::vector<lowp16> data(10);
  EXPECT_THROW(comm.reduce_scatter_sum_lowp(data.data(), data.data(), ShardLayout::balanced(10, 2, 1)), Error);
  EXPECT_THROW(comm.allgather_lowp(data.data(), data.data(), ShardLayout::balanced(10, 2, 1)), Error);
  EXPECT_THROW(comm.allgather_lowp(data.data() + 1, data.data(), ShardLayout::balanced(9, 1, 1)), Error);  // overlap
  std::vector<float> sums(10);
  EXPECT_THROW(comm.start_reduce_scatter_sum_fp32(sums.data(), sums.data(), ShardLayout::balanced(10, 2, 1)), Error);
  EXPECT_THROW(comm.start_reduce_scatter_sum_fp32(sums.data() + 1, sums.data(), ShardLayout::balanced(9, 1, 1)),
               Error);  // overlap
}

}  // namespace
}  // namespace ddp
