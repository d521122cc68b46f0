// mpi_test_padded_collectives.cpp: the padded plan the NCCL communicator
// runs for uneven layouts (comm/padded_collectives.h), on CPU ranks: host
// copies and MPI's equal-count collectives (MPI_Reduce_scatter_block,
// MPI_Allgather) stand in for cudaMemcpyAsync and ncclReduceScatter /
// ncclAllGather, which take the same per-rank count and buffer layout. The
// same closed-form values and layouts as the MPI communicator's suite; the
// staging buffer starts as NaN poison, so padding that leaked into a result
// would show.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstring>
#include <string>
#include <vector>

#include "comm/padded_collectives.h"
#include "comm/shard_layout.h"
#include "kernels/half.h"
#include "mpi/mpi_test_support.h"
#include "mpi/shard_test_values.h"
#include "support/test_support.h"

namespace ddp {
namespace {
using test::failures_anywhere;
using namespace test::shard_values;

// FP16 sum as the communicator's: FP32 add, one rounding per step.
void fp16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  const lowp16* a = static_cast<const lowp16*>(in);
  lowp16* b = static_cast<lowp16*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = to_half(half_to_float(b[i]) + half_to_float(a[i]));
}

// MPI's equal-count collectives with NCCL's signatures.
class EqualCountMpi {
 public:
  EqualCountMpi() {
    MPI_Type_contiguous(2, MPI_BYTE, &half_type_);
    MPI_Type_commit(&half_type_);
    MPI_Op_create(&fp16_sum, /*commute=*/1, &sum_);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  }
  ~EqualCountMpi() {
    MPI_Op_free(&sum_);
    MPI_Type_free(&half_type_);
  }
  int rank() const { return rank_; }
  void reduce_scatter(const lowp16* send, lowp16* recv, size_t per_rank) const {
    MPI_Reduce_scatter_block(send, recv, static_cast<int>(per_rank), half_type_, sum_, MPI_COMM_WORLD);
  }
  void allgather(const lowp16* mine, lowp16* full, size_t per_rank) const {
    MPI_Allgather(mine, static_cast<int>(per_rank), half_type_, full, static_cast<int>(per_rank), half_type_,
                  MPI_COMM_WORLD);
  }

 private:
  MPI_Datatype half_type_ = MPI_DATATYPE_NULL;
  MPI_Op sum_ = MPI_OP_NULL;
  int rank_ = 0;
};

void host_copy(lowp16* dst, const lowp16* src, size_t count) { std::memcpy(dst, src, count * sizeof(lowp16)); }

int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

TEST(MpiPaddedCollectives, SlotsAreAlignedAndHoldTheLongestRange) {
  int bad = 0;
  for (const ShardLayout& layout : test_layouts(world_size(), shared_seed())) {
    const size_t slot = padded_slot_count(layout);
    bad += slot % kPaddedSlotAlignElements != 0;
    bad += slot < layout.max_range_count() || slot >= layout.max_range_count() + kPaddedSlotAlignElements;
    bad += padded_staging_count(layout) != (static_cast<size_t>(layout.world_size()) + 1) * slot;
  }
  EXPECT_EQ(bad, 0);
}

TEST(MpiPaddedCollectives, ReduceScatterThroughEqualCountsSumsEachRange) {
  const EqualCountMpi mpi;
  const int r = mpi.rank();
  const auto reduce_scatter = [&](const lowp16* s, lowp16* d, size_t n) { mpi.reduce_scatter(s, d, n); };
  int bad = 0;
  std::string first_bad;
  for (const ShardLayout& layout : test_layouts(world_size(), shared_seed())) {
    std::vector<lowp16> staging = test::poison_halves(padded_staging_count(layout));
    const std::vector<lowp16> send = full_contribution(r, layout.total_count());
    std::vector<lowp16> recv = test::poison_halves(layout.range(r).count() + kGuard);
    padded_reduce_scatter(send.data(), recv.data(), layout, r, staging.data(), host_copy, reduce_scatter);
    int errors = reduce_scatter_errors(recv, layout, r);
    // In place: the sum lands in the rank's range of the send buffer.
    std::vector<lowp16> data = full_contribution(r, layout.total_count());
    const ShardRange mine = layout.range(r);
    padded_reduce_scatter(data.data(), data.data() + mine.begin, layout, r, staging.data(), host_copy, reduce_scatter);
    for (size_t i = mine.begin; i < mine.end; ++i)
      errors += half_to_float(data[i]) != expected_sum(layout.world_size(), i);
    if (errors && first_bad.empty()) first_bad = describe(layout);
    bad += errors;
  }
  EXPECT_EQ(failures_anywhere(bad), 0) << "rank " << r << ", first wrong " << first_bad;
}

// The FP32 sums' plan (--grad-reduce-dtype fp32 on NCCL): the same slots
// of floats, MPI_FLOAT sums of small integers (exact in any order).
TEST(MpiPaddedCollectives, Fp32ReduceScatterThroughEqualCountsSumsEachRange) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const auto reduce_scatter = [](const float* s, float* d, size_t n) {
    MPI_Reduce_scatter_block(s, d, static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  };
  const auto copy = [](float* dst, const float* src, size_t count) { std::memcpy(dst, src, count * sizeof(float)); };
  int bad = 0;
  for (const ShardLayout& layout : test_layouts(world_size(), shared_seed())) {
    std::vector<float> staging(padded_staging_count(layout), -1.0f);
    std::vector<float> send(layout.total_count());
    for (size_t i = 0; i < send.size(); ++i) send[i] = contribution(rank, i);
    const ShardRange mine = layout.range(rank);
    std::vector<float> recv(mine.count() + kGuard, -1.0f);
    padded_reduce_scatter(send.data(), recv.data(), layout, rank, staging.data(), copy, reduce_scatter);
    for (size_t k = 0; k < mine.count(); ++k) bad += recv[k] != expected_sum(layout.world_size(), mine.begin + k);
    for (size_t k = mine.count(); k < recv.size(); ++k) bad += recv[k] != -1.0f;
  }
  EXPECT_EQ(failures_anywhere(bad), 0) << "rank " << rank;
}

TEST(MpiPaddedCollectives, AllgatherThroughEqualCountsRebuildsTheFullBuffer) {
  const EqualCountMpi mpi;
  const int r = mpi.rank();
  const auto allgather = [&](const lowp16* s, lowp16* d, size_t n) { mpi.allgather(s, d, n); };
  int bad = 0;
  std::string first_bad;
  for (const ShardLayout& layout : test_layouts(world_size(), shared_seed())) {
    std::vector<lowp16> staging = test::poison_halves(padded_staging_count(layout));
    const ShardRange mine = layout.range(r);
    const std::vector<lowp16> part = my_part_of_pattern(mine);
    std::vector<lowp16> full = test::poison_halves(layout.total_count() + kGuard);
    padded_allgather(part.data(), full.data(), layout, r, staging.data(), host_copy, allgather);
    int errors = allgather_errors(full, layout.total_count());
    // In place: only the rank's own range is set beforehand.
    std::vector<lowp16> same = test::poison_halves(layout.total_count() + kGuard);
    for (size_t i = mine.begin; i < mine.end; ++i) same[i] = pattern(i);
    padded_allgather(same.data() + mine.begin, same.data(), layout, r, staging.data(), host_copy, allgather);
    errors += allgather_errors(same, layout.total_count());
    if (errors && first_bad.empty()) first_bad = describe(layout);
    bad += errors;
  }
  EXPECT_EQ(failures_anywhere(bad), 0) << "rank " << r << ", first wrong " << first_bad;
}

}  // namespace
}  // namespace ddp
