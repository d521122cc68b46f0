// shard_test_values.h: closed-form values and layouts shared by the MPI
// suites of the sharded collectives (mpi_test_shard_collectives.cpp,
// mpi_test_padded_collectives.cpp): every rank computes what each rank sends
// and what each must receive, nccl-tests style. Header-only: the suites are
// one binary.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "comm/shard_layout.h"
#include "kernels/half.h"
#include "support/test_support.h"

namespace ddp::test::shard_values {

constexpr size_t kGuard = 5;  // poisoned elements past a receive buffer's end

// Rank r's element i: a small integer, so any sum over 4 ranks (< 80) is
// exact in FP16 whatever the order of the adds.
inline float contribution(int rank, size_t i) {
  return static_cast<float>((i * 7 + static_cast<size_t>(rank) * 3) % 17 + static_cast<size_t>(rank));
}
inline float expected_sum(int world, size_t i) {
  float sum = 0.0f;
  for (int q = 0; q < world; ++q) sum += contribution(q, i);
  return sum;
}
// The full buffer an all-gather must produce: finite FP16 bits (either
// sign, any exponent but Inf/NaN's) that differ between neighbours, so a
// range landing anywhere but its own place shows.
inline lowp16 pattern(size_t i) {
  const uint32_t mixed = static_cast<uint32_t>(i * 2654435761u) >> 7;
  return lowp16{static_cast<uint16_t>((mixed % 0x7c00u) | ((i & 1u) << 15))};
}

// The same seed on every rank (test_seed() differs per process).
inline uint64_t shared_seed() {
  uint64_t seed = test::test_seed();
  MPI_Bcast(&seed, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  return seed;
}

// Balanced layouts of awkward counts for A = 1 and A = 64, and random
// uneven ones (empty ranges anywhere, ranges of any length).
inline std::vector<ShardLayout> test_layouts(int world, uint64_t seed) {
  std::vector<ShardLayout> layouts;
  for (size_t align : {size_t{1}, size_t{64}})
    for (size_t count : {0, 1, 2, 3, 7, 64, 65, 1000, 100003})
      layouts.push_back(ShardLayout::balanced(count, world, align));
  layouts.push_back(ShardLayout::balanced(1000003, world, 64));
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 12; ++trial) {
    std::vector<size_t> bounds{0};
    for (int r = 0; r < world; ++r) bounds.push_back(bounds.back() + (rng() % 3 == 0 ? 0 : rng() % 300));
    layouts.emplace_back(bounds);
  }
  return layouts;
}

inline std::string describe(const ShardLayout& layout) {
  std::string s = "layout of " + std::to_string(layout.total_count()) + ":";
  for (int r = 0; r < layout.world_size(); ++r)
    s += " [" + std::to_string(layout.range(r).begin) + ", " + std::to_string(layout.range(r).end) + ")";
  return s;
}

// Wrong elements of rank `rank`'s reduce-scatter result (`got`: its range,
// then kGuard guards that must still hold the poison).
inline int reduce_scatter_errors(const std::vector<lowp16>& got, const ShardLayout& layout, int rank) {
  const ShardRange mine = layout.range(rank);
  int bad = 0;
  for (size_t k = 0; k < mine.count(); ++k)
    bad += half_to_float(got[k]) != expected_sum(layout.world_size(), mine.begin + k);
  for (size_t k = mine.count(); k < got.size(); ++k) bad += got[k].bits != test::kPoisonHalfBits;
  return bad;
}

inline std::vector<lowp16> full_contribution(int rank, size_t count) {
  std::vector<lowp16> send(count);
  for (size_t i = 0; i < count; ++i) send[i] = to_half(contribution(rank, i));
  return send;
}

// Rank r's range of pattern(), gathered: every rank must hold pattern()
// exactly, and the same bits as rank 0.
inline int allgather_errors(const std::vector<lowp16>& full, size_t count) {
  int bad = 0;
  for (size_t i = 0; i < count; ++i) bad += full[i].bits != pattern(i).bits;
  for (size_t i = count; i < full.size(); ++i) bad += full[i].bits != test::kPoisonHalfBits;
  std::vector<lowp16> root = full;
  MPI_Bcast(root.data(), static_cast<int>(root.size() * sizeof(lowp16)), MPI_BYTE, 0, MPI_COMM_WORLD);
  bad += std::memcmp(root.data(), full.data(), full.size() * sizeof(lowp16)) != 0;
  return bad;
}

inline std::vector<lowp16> my_part_of_pattern(const ShardRange& mine) {
  std::vector<lowp16> part(mine.count());
  for (size_t k = 0; k < part.size(); ++k) part[k] = pattern(mine.begin + k);
  return part;
}

}  // namespace ddp::test::shard_values
