// distributed_sampler.h: PyTorch DistributedSampler semantics.
// Epoch e's order is a permutation seeded by (seed, e) (identity with
// shuffle off), padded to a multiple of the world size by repeating from its
// start (or truncated with drop_last); rank r takes positions r, r+N, r+2N...
// Global batch k of the epoch is positions [k*G, (k+1)*G) with G = N * B, so
// a position in the epoch is a global sample offset that means the same
// thing for any world size with the same global batch: checkpoints store it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ddp {

class DistributedSampler {
 public:
  DistributedSampler(size_t dataset_size, int rank, int world_size, uint64_t seed, bool shuffle, bool drop_last);

  // Indices this rank visits in `epoch`, in order.
  std::vector<uint32_t> rank_indices(int64_t epoch) const;
  // Samples per rank per epoch (after padding or dropping).
  size_t samples_per_rank() const { return per_rank_; }

 private:
  size_t dataset_size_;
  int rank_, world_size_;
  uint64_t seed_;
  bool shuffle_, drop_last_;
  size_t per_rank_;
};

// The epoch permutation: deterministic on every platform (our own
// Fisher-Yates over splitmix64, not std::shuffle whose algorithm is
// implementation-defined).
std::vector<uint32_t> epoch_permutation(size_t n, uint64_t seed, int64_t epoch);

}  // namespace ddp
