// mpi_test_shard_groups.cpp: the MPI communicator's shard groups (hybrid
// sharding, --zero-shard-size G): at every G that divides the world below
// it (CTest's 2, 3 and 4 ranks: G = 1, and 2 at 4 ranks), a reduce-scatter
// over a layout of G ranges sums over the whole world (inside the group,
// then across the replicas), an all-gather fills each rank's buffer from
// its own group only, and the shard-group host sum counts the group alone.
// Values are closed-form (shard_test_values.h), buffers poisoned, guards
// past their end.
#include <gtest/gtest.h>
#include <mpi.h>

#include <functional>
#include <string>
#include <vector>

#include "comm/mpi_communicator.h"
#include "comm/shard_layout.h"
#include "kernels/error.h"
#include "kernels/half_convert.h"
#include "mpi/mpi_test_support.h"
#include "mpi/shard_test_values.h"
#include "support/test_support.h"

namespace ddp {
namespace {
using test::failures_anywhere;
using namespace test::shard_values;

// The shard sizes below the world that divide it.
std::vector<int> group_sizes(int world) {
  std::vector<int> sizes;
  for (int g = 1; g < world; ++g)
    if (world % g == 0) sizes.push_back(g);
  return sizes;
}

// Group `group`'s all-gather result: another pattern per group, so a range
// from another group shows.
lowp16 group_pattern(int group, size_t i) { return pattern(i + 7919 * static_cast<size_t>(group)); }

TEST(MpiShardGroups, RanksFormGroupsOfConsecutiveRanks) {
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  int bad = 0;
  for (int g : group_sizes(world)) {
    MpiCommunicator comm(MPI_COMM_WORLD, g);
    bad += comm.shard_size() != g || comm.shard_rank() != rank % g || comm.shard_replicas() != world / g;
    bad += comm.rank() != rank || comm.world_size() != world;
  }
  MpiCommunicator whole(MPI_COMM_WORLD, 0);
  bad += whole.shard_size() != world || whole.shard_rank() != rank;
  EXPECT_EQ(failures_anywhere(bad), 0) << "rank " << rank;
}

TEST(MpiShardGroups, ASizeThatDoesNotDivideTheWorldIsRefused) {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  EXPECT_THROW(MpiCommunicator(MPI_COMM_WORLD, world + 1), Error);
  EXPECT_THROW(MpiCommunicator(MPI_COMM_WORLD, -1), Error);
  if (world > 2) {
    EXPECT_THROW(MpiCommunicator(MPI_COMM_WORLD, world - 1), Error);
  }
}

// Runs `errors_of` on every layout of test_layouts at every group size,
// each over a communicator of those groups; the errors summed, and the
// first failing case named in `first_bad`.
int errors_over_group_layouts(const std::function<int(MpiCommunicator&, const ShardLayout&)>& errors_of,
                              std::string& first_bad) {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  int bad = 0;
  for (int g : group_sizes(world)) {
    MpiCommunicator comm(MPI_COMM_WORLD, g);
    for (const ShardLayout& layout : test_layouts(g, shared_seed())) {
      const int errors = errors_of(comm, layout);
      if (errors > 0 && first_bad.empty()) first_bad = "groups of " + std::to_string(g) + ", " + describe(layout);
      bad += errors;
    }
  }
  return bad;
}

// Out of place and in place, synchronous and started.
TEST(MpiShardGroups, ReduceScatterSumsOverTheWholeWorld) {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  std::string first_bad;
  const int bad = errors_over_group_layouts(
      [world](MpiCommunicator& comm, const ShardLayout& layout) {
        const int r = comm.rank();
        const ShardRange mine = layout.range(comm.shard_rank());
        const std::vector<lowp16> send = full_contribution(r, layout.total_count());
        std::vector<lowp16> recv = test::poison_halves(mine.count() + kGuard);
        comm.reduce_scatter_sum_lowp(send.data(), recv.data(), layout);
        std::vector<lowp16> data = full_contribution(r, layout.total_count());
        data.resize(layout.total_count() + kGuard, lowp16{test::kPoisonHalfBits});
        comm.start_reduce_scatter_sum_lowp(data.data(), data.data() + mine.begin, layout);
        comm.wait_allreduces();
        int errors = 0;
        for (size_t k = 0; k < mine.count(); ++k) {
          errors += half_to_float(recv[k]) != expected_sum(world, mine.begin + k);
          errors += half_to_float(data[mine.begin + k]) != expected_sum(world, mine.begin + k);
        }
        for (size_t k = mine.count(); k < recv.size(); ++k) errors += recv[k].bits != test::kPoisonHalfBits;
        for (size_t i = layout.total_count(); i < data.size(); ++i) errors += data[i].bits != test::kPoisonHalfBits;
        return errors;
      },
      first_bad);
  EXPECT_EQ(failures_anywhere(bad), 0) << "first wrong: " << first_bad;
}

TEST(MpiShardGroups, AllgatherFillsFromTheRanksOwnGroupOnly) {
  std::string first_bad;
  const int bad = errors_over_group_layouts(
      [](MpiCommunicator& comm, const ShardLayout& layout) {
        const int group = comm.rank() / comm.shard_size();
        const ShardRange mine = layout.range(comm.shard_rank());
        std::vector<lowp16> part(mine.count());
        for (size_t k = 0; k < part.size(); ++k) part[k] = group_pattern(group, mine.begin + k);
        std::vector<lowp16> full = test::poison_halves(layout.total_count() + kGuard);
        comm.start_allgather_lowp(part.data(), full.data(), layout);
        comm.wait_allreduces();
        int errors = 0;
        for (size_t i = 0; i < layout.total_count(); ++i) errors += full[i].bits != group_pattern(group, i).bits;
        for (size_t i = layout.total_count(); i < full.size(); ++i) errors += full[i].bits != test::kPoisonHalfBits;
        return errors;
      },
      first_bad);
  EXPECT_EQ(failures_anywhere(bad), 0) << "first wrong: " << first_bad;
}

// Rank r adds 2^r: the sum names exactly the ranks it counted.
TEST(MpiShardGroups, TheShardGroupHostSumCountsTheGroupAlone) {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  int bad = 0;
  for (int g : group_sizes(world)) {
    MpiCommunicator comm(MPI_COMM_WORLD, g);
    const int first = comm.rank() - comm.shard_rank();
    double expected = 0.0;
    for (int q = first; q < first + g; ++q) expected += static_cast<double>(1 << q);
    bad += comm.allreduce_sum_host_shard_group(static_cast<double>(1 << comm.rank())) != expected;
    bad += comm.allreduce_sum_host(1.0) != static_cast<double>(world);
  }
  EXPECT_EQ(failures_anywhere(bad), 0);
}

}  // namespace
}  // namespace ddp
