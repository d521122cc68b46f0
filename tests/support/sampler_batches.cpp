// sampler_batches.cpp: see sampler_batches.h.
#include "support/sampler_batches.h"

#include <algorithm>

#include "trainer/data/distributed_sampler.h"

namespace ddp::test {

std::vector<std::vector<uint32_t>> sampler_batches(size_t samples, int rank, int world, uint64_t seed, bool shuffle,
                                                   bool drop_last, int64_t batch, int64_t accum, int64_t steps) {
  const DistributedSampler sampler(samples, rank, world, seed, shuffle, drop_last);
  const int64_t per_rank = static_cast<int64_t>(sampler.samples_per_rank()), per_step = batch * accum;
  std::vector<std::vector<uint32_t>> out;
  for (int64_t epoch = 0, step = 0; step < steps; ++epoch) {
    const std::vector<uint32_t> order = sampler.rank_indices(epoch);
    for (int64_t pos = 0; pos < per_rank && step < steps; pos += per_step, ++step) {
      if (drop_last && pos + per_step > per_rank) break;
      const int64_t end = std::min(pos + per_step, per_rank);
      for (int64_t first = pos; first < end; first += batch)
        out.emplace_back(order.begin() + first, order.begin() + std::min(first + batch, end));
    }
  }
  return out;
}

}  // namespace ddp::test
