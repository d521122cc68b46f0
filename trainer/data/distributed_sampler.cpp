// distributed_sampler.cpp
#include "trainer/data/distributed_sampler.h"

#include <numeric>

#include "kernels/error.h"

namespace ddp {
namespace {
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
}  // namespace

std::vector<uint32_t> epoch_permutation(size_t n, uint64_t seed, int64_t epoch) {
  std::vector<uint32_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0u);
  uint64_t state = seed * 0x2545f4914f6cdd1dull + static_cast<uint64_t>(epoch) + 1;
  for (size_t i = n; i > 1; --i) {
    // Multiply-shift maps 64 random bits onto [0, i) with negligible bias.
    const uint64_t r = splitmix64(state);
    const size_t j = static_cast<size_t>((static_cast<unsigned __int128>(r) * i) >> 64);
    std::swap(perm[i - 1], perm[j]);
  }
  return perm;
}

DistributedSampler::DistributedSampler(size_t dataset_size, int rank, int world_size, uint64_t seed, bool shuffle,
                                       bool drop_last)
    : dataset_size_(dataset_size),
      rank_(rank),
      world_size_(world_size),
      seed_(seed),
      shuffle_(shuffle),
      drop_last_(drop_last) {
  DDP_REQUIRE(world_size > 0 && rank >= 0 && rank < world_size, "DistributedSampler: bad rank/world size");
  // The two below follow from the data and the flags, so they are a user's
  // error, said as such (the readers refuse an empty data set first).
  if (dataset_size == 0) throw Error("no training samples: the training data set is empty");
  per_rank_ = drop_last ? dataset_size / world_size : (dataset_size + world_size - 1) / world_size;
  if (per_rank_ == 0) {
    throw Error("--drop-last: the " + std::to_string(dataset_size) + " training samples give no sample to each of " +
                std::to_string(world_size) + " ranks (use fewer ranks or drop --drop-last)");
  }
}

std::vector<uint32_t> DistributedSampler::rank_indices(int64_t epoch) const {
  std::vector<uint32_t> order;
  if (shuffle_) {
    order = epoch_permutation(dataset_size_, seed_, epoch);
  } else {
    order.resize(dataset_size_);
    std::iota(order.begin(), order.end(), 0u);
  }
  const size_t total = per_rank_ * world_size_;
  // Pad by repeating from the start (repeat the whole list as often as needed).
  for (size_t i = order.size(); i < total; ++i) order.push_back(order[i % dataset_size_]);
  std::vector<uint32_t> mine(per_rank_);
  for (size_t j = 0; j < per_rank_; ++j) mine[j] = order[j * world_size_ + rank_];
  return mine;
}

}  // namespace ddp
