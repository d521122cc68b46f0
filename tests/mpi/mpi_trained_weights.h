// mpi_trained_weights.h: one training run of a config on this rank (a CPU
// backend, one thread) and the weights it ends with, which the MPI suites
// of run settings compare between settings (--recompute,
// --classifier-logits, --zero-prefetch), bit for bit or in norm.
#pragma once

#include <mpi.h>

#include <cstring>
#include <vector>

#include "comm/communicator.h"
#include "kernels/cpu/cpu_backend.h"
#include "trainer/loop/trainer.h"

namespace ddp::test {

struct TrainedWeights {
  std::vector<float> master;    // the snapshot's FP32 masters (whole: gathered at --zero)
  std::vector<lowp16> weights;  // this rank's FP16 weights
  size_t zero_buffers = 0;      // the gather and staging buffers held at the end
};

inline TrainedWeights train_weights(const TrainConfig& c, Communicator& comm, const TrainTestData& data) {
  CpuBackend cpu(1, c.precision);
  Trainer t(c, cpu, comm, data);
  t.prepare();
  t.run();
  return TrainedWeights{t.snapshot().master_weights_fp32, t.weights_lowp(), t.state_bytes().zero_buffers};
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// Whether this rank's FP16 weights are rank 0's, bit for bit (a collective).
inline bool same_as_rank0(const std::vector<lowp16>& weights) {
  std::vector<lowp16> rank0 = weights;
  MPI_Bcast(rank0.data(), static_cast<int>(rank0.size() * sizeof(lowp16)), MPI_BYTE, 0, MPI_COMM_WORLD);
  return std::memcmp(rank0.data(), weights.data(), weights.size() * sizeof(lowp16)) == 0;
}

}  // namespace ddp::test
