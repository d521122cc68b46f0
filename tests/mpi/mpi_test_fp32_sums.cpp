// mpi_test_fp32_sums.cpp: --grad-reduce-dtype fp32 below the trainer, at
// whatever world mpiexec gives (CTest: 2, 3 and 4 ranks).
//
// The MPI communicator's FP32 sums (start_allreduce_sum_fp32,
// start_reduce_scatter_sum_fp32) on values whose sums FP32 holds exactly
// in any order but 16 bits cannot (small integers plus multiples of
// 2^-10), over the shard collectives' layouts (empty ranges, odd counts),
// in place and not, with shard groups; buffers poisoned, guards past their
// end.
//
// The GradientReducer in FP32 (all-reduced, sharded in place, staged as
// ZeRO 2 and 3 stage them; more buckets than its staging buffers, so the
// step waits for their collectives), on random 16-bit gradients: every sum
// within the FP32 error of N terms of the exact (double) sum of the
// widened values; the same reducer in 16 bits is off by its rounding, far
// more, which is what the FP32 sums are for.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "comm/gradient_reducer.h"
#include "comm/mpi_communicator.h"
#include "comm/shard_layout.h"
#include "kernels/cpu/cpu_backend.h"
#include "mpi/mpi_test_support.h"
#include "mpi/shard_test_values.h"
#include "support/lowp_format.h"
#include "support/test_support.h"

namespace ddp {
namespace {
using test::failures_anywhere;
using namespace test::shard_values;
using test::LowpFormat;

// Rank r's element i: shard_test_values' integer plus k x 2^-10 (k < 8).
// A sum over 4 ranks needs 7 + 10 bits: exact in FP32 in any order, not in
// FP16 (11 bits) or BF16 (8).
float fine_contribution(int rank, size_t i) {
  return contribution(rank, i) + std::ldexp(static_cast<float>((i * 5 + static_cast<size_t>(rank)) % 8), -10);
}
float fine_sum(int world, size_t i) {
  float sum = 0.0f;
  for (int q = 0; q < world; ++q) sum += fine_contribution(q, i);
  return sum;
}
std::vector<float> fine_buffer(int rank, size_t count) {
  std::vector<float> out(count);
  for (size_t i = 0; i < count; ++i) out[i] = fine_contribution(rank, i);
  return out;
}
const float kPoisonFloat = -12345.5f;

TEST(MpiFp32Sums, AllreduceSumsInFp32) {
  MpiCommunicator comm;
  int bad = 0;
  for (const size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}, size_t{100003}}) {
    std::vector<float> data = fine_buffer(comm.rank(), count);
    data.resize(count + kGuard, kPoisonFloat);
    comm.start_allreduce_sum_fp32(data.data(), count);
    comm.wait_allreduces();
    for (size_t i = 0; i < count; ++i) bad += data[i] != fine_sum(comm.world_size(), i);
    for (size_t i = count; i < data.size(); ++i) bad += data[i] != kPoisonFloat;
  }
  EXPECT_EQ(failures_anywhere(bad), 0) << "rank " << comm.rank();
}

// Every shard size that divides the world (the whole world, and hybrid
// groups below it): the sums are over every rank of the world.
TEST(MpiFp32Sums, ReduceScatterSumsEachRankItsRangeInAndOutOfPlace) {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  int bad = 0;
  std::string first_bad;
  for (int group = 1; group <= world; ++group) {
    if (world % group != 0) continue;
    MpiCommunicator comm(MPI_COMM_WORLD, group);
    for (const ShardLayout& layout : test_layouts(group, shared_seed())) {
      const ShardRange mine = layout.range(comm.shard_rank());
      const std::vector<float> send = fine_buffer(comm.rank(), layout.total_count());
      std::vector<float> recv(mine.count() + kGuard, kPoisonFloat);
      comm.start_reduce_scatter_sum_fp32(send.data(), recv.data(), layout);
      std::vector<float> data = fine_buffer(comm.rank(), layout.total_count());
      data.resize(layout.total_count() + kGuard, kPoisonFloat);
      comm.start_reduce_scatter_sum_fp32(data.data(), data.data() + mine.begin, layout);
      comm.wait_allreduces();
      int errors = 0;
      for (size_t k = 0; k < mine.count(); ++k) {
        errors += recv[k] != fine_sum(world, mine.begin + k);
        errors += data[mine.begin + k] != fine_sum(world, mine.begin + k);
      }
      for (size_t k = mine.count(); k < recv.size(); ++k) errors += recv[k] != kPoisonFloat;
      for (size_t i = layout.total_count(); i < data.size(); ++i) errors += data[i] != kPoisonFloat;
      if (errors > 0 && first_bad.empty()) first_bad = "groups of " + std::to_string(group) + ", " + describe(layout);
      bad += errors;
    }
  }
  EXPECT_EQ(failures_anywhere(bad), 0) << "first wrong: " << first_bad;
}

// ---- the reducer ------------------------------------------------------------------

enum class ReducerMode { AllReduced, ShardedInPlace, Staged };

const char* mode_name(ReducerMode m) {
  return m == ReducerMode::AllReduced ? "all-reduced" : m == ReducerMode::ShardedInPlace ? "sharded" : "staged";
}

// Tensors of awkward sizes at 8-element offsets (padding between them, as
// the parameter registry lays them out): the reducer's segments.
std::vector<GradientSegment> segments_of(std::mt19937_64& rng, size_t* total) {
  std::vector<GradientSegment> segments;
  size_t at = 0;
  for (int t = 0; t < 9; ++t) {
    const size_t count = 1 + rng() % 3000;
    segments.push_back({at, count});
    at = (at + count + 7) / 8 * 8;
  }
  *total = at;
  return segments;
}

struct SumErrors {
  double worst_fraction = 0;  // of the FP32 bound (N - 1) 2^-24 sum|x| + the smallest normal
  double worst_absolute = 0;
};

// One step of `mode` over every rank's `grads` (16-bit, the format's), in
// FP32 or 16 bits, against the exact sums of the widened values. Buckets of
// about 4 KB: several per step, more than the FP32 staging buffers.
SumErrors reduce_and_compare(MpiCommunicator& comm, CpuBackend& cpu, const LowpFormat& fmt, ReducerMode mode, bool fp32,
                             const std::vector<GradientSegment>& segments, size_t total,
                             const std::vector<std::vector<lowp16>>& all_grads) {
  const int rank = comm.rank(), world = comm.world_size();
  GradientReducer reducer(comm, segments, 4096, 1024);
  const ShardLayout layout = ShardLayout::balanced(total, world, 8);
  const ShardRange mine = mode == ReducerMode::AllReduced ? ShardRange{0, total} : layout.range(rank);
  std::vector<lowp16> grads = all_grads[static_cast<size_t>(rank)];
  std::vector<lowp16> owned(mine.count(), lowp16{0});  // zero, as the store's range starts
  if (mode == ReducerMode::ShardedInPlace) reducer.shard_over(layout);
  if (mode == ReducerMode::Staged)
    reducer.shard_over(layout, owned.data(), [&](size_t b) { return grads.data() + reducer.buckets()[b].offset; });
  // Zero, as the store's FP32 gradients start: padding no bucket covers
  // (past the last tensor) is never written, and must read as its sum, 0.
  std::vector<float> sums(mine.count(), 0.0f);
  if (fp32) reducer.reduce_in_fp32(cpu, sums.data());
  reducer.begin(mode == ReducerMode::Staged ? nullptr : grads.data());
  reducer.mark_ready(0, segments.size());
  reducer.finalize();
  SumErrors e;
  for (size_t k = 0; k < mine.count(); ++k) {
    const size_t i = mine.begin + k;
    double exact = 0, magnitude = 0;
    for (int q = 0; q < world; ++q) {
      const double x = fmt.widen(all_grads[static_cast<size_t>(q)][i]);
      exact += x;
      magnitude += std::fabs(x);
    }
    double got = 0;
    if (fp32) {
      got = sums[k];
    } else {
      got = fmt.widen(mode == ReducerMode::Staged ? owned[k] : grads[i]);
    }
    const double error = std::fabs(got - exact);
    const double bound = (world - 1) * std::ldexp(magnitude, -24) + 1.2e-38;
    e.worst_fraction = std::max(e.worst_fraction, std::isnan(error) ? 1e30 : error / bound);
    e.worst_absolute = std::max(e.worst_absolute, std::isnan(error) ? 1e30 : error);
  }
  return e;
}

class GradientReducerFp32 : public ::testing::TestWithParam<Precision> {};

TEST_P(GradientReducerFp32, SumsAreFp32InEveryModeWhere16BitSumsRound) {
  MpiCommunicator comm(MPI_COMM_WORLD, 0, GetParam());
  CpuBackend cpu(1, GetParam());
  const LowpFormat fmt{GetParam()};
  std::mt19937_64 rng(shared_seed());
  size_t total = 0;
  const std::vector<GradientSegment> segments = segments_of(rng, &total);
  // Every rank draws every rank's gradients from the shared seed: each can
  // make the exact sums. Padding stays zero, as backward leaves it.
  std::vector<std::vector<lowp16>> all(static_cast<size_t>(comm.world_size()), std::vector<lowp16>(total));
  for (auto& grads : all)
    for (const GradientSegment& s : segments) {
      const std::vector<lowp16> values = fmt.random(rng, s.count, -4.0f, 4.0f);
      std::copy(values.begin(), values.end(), grads.begin() + static_cast<std::ptrdiff_t>(s.offset));
    }
  int bad = 0;
  for (const ReducerMode mode : {ReducerMode::AllReduced, ReducerMode::ShardedInPlace, ReducerMode::Staged}) {
    const SumErrors fp32 = reduce_and_compare(comm, cpu, fmt, mode, true, segments, total, all);
    const SumErrors lowp = reduce_and_compare(comm, cpu, fmt, mode, false, segments, total, all);
    const bool fp32_within = fp32.worst_fraction <= 1.0;
    // A 16-bit sum of two values in [-4, 4] is off by up to half an ulp
    // of the format (2^-12 at 2..4 in FP16, 2^-7 in BF16): orders of
    // magnitude above FP32's error; checked on rank 0's range alone (a
    // rank's range can be small).
    const bool lowp_rounds = lowp.worst_absolute > 64 * std::max(fp32.worst_absolute, 1e-9);
    bad += !fp32_within + (comm.rank() == 0 && comm.world_size() > 1 && !lowp_rounds);
    if (comm.rank() == 0)
      std::printf("%s: worst FP32 sum error %.3g (%.2f of its bound), worst %s sum error %.3g\n", mode_name(mode),
                  fp32.worst_absolute, fp32.worst_fraction, precision_name(GetParam()), lowp.worst_absolute);
    EXPECT_TRUE(fp32_within) << mode_name(mode) << ": rank " << comm.rank() << " worst FP32 error "
                             << fp32.worst_absolute << " (" << fp32.worst_fraction << " of its bound)";
  }
  EXPECT_EQ(failures_anywhere(bad), 0);
}

INSTANTIATE_TEST_SUITE_P(Precisions, GradientReducerFp32, ::testing::ValuesIn(test::kBothPrecisions),
                         test::precision_test_name);

}  // namespace
}  // namespace ddp
