// sampler_batches.h: the sample indices a rank trains on, from the trainer's
// own DistributedSampler (apart from test_support.h, which the SIMT
// executor's tests use without the trainer).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ddp::test {

// The micro-batches (this rank's sample indices) of the first `steps`
// training steps, straight from DistributedSampler: each epoch's order cut
// into steps of batch x accum rows and those into micro-batches of batch
// rows; an epoch's last step may be short, or is dropped with drop_last.
std::vector<std::vector<uint32_t>> sampler_batches(size_t samples, int rank, int world, uint64_t seed, bool shuffle,
                                                   bool drop_last, int64_t batch, int64_t accum, int64_t steps);

}  // namespace ddp::test
