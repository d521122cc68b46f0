// mpi_zero_cases.h: the runs the ZeRO suites train and compare
// (mpi_test_zero.cpp, mpi_test_zero_hybrid.cpp): the MLP and the tiny GPT,
// SGD and AdamW clipped by the global norm, 8 steps on a seed every rank
// agrees on, and the comparisons of their results across ranks and runs.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "mpi/mpi_gpt_config.h"
#include "support/test_support.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/config/model_catalog.h"
#include "trainer/config/train_config.h"
#include "trainer/loop/trainer.h"

namespace ddp::test::zero_cases {

// A seed every rank agrees on (rank 0's), fresh per run.
inline uint64_t agreed_seed() {
  uint64_t seed = test_seed() % 100000;
  MPI_Bcast(&seed, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  return seed;
}

inline TrainConfig mlp_config(uint64_t seed) {
  TrainConfig c;
  c.data.kind = "synthetic";
  c.mlp.layer_widths = {10, 48, 32, 10};  // 2,410 parameters: every rank owns a non-empty range
  c.loss = LossKind::MeanSquaredError;
  c.loss_name = "mse";
  c.optimizer = OptimizerKind::Sgd;
  c.lr = 0.05;
  c.momentum = 0.9;
  c.log_every = 1000;
  c.seed = seed;
  c.lr_schedule = LrScheduleKind::Constant;
  c.data.synthetic_train_samples = 960;
  c.data.synthetic_test_samples = 120;
  c.global_batch = 48;              // divisible by 1, 2, 3 and 4
  c.loss_scaler.init_scale = 1024;  // no overflow in the N-rank FP16 sum
  return c;
}

struct Case {
  const char* name;
  bool gpt;
  bool adamw;  // with clipping by the global norm at a bound every step exceeds
};

inline TrainConfig case_config(const Case& k, const std::string& dir, uint64_t seed) {
  TrainConfig c = k.gpt ? tiny_gpt_config(dir) : mlp_config(seed);
  c.seed = seed;
  c.shuffle = false;
  c.steps = 8;
  if (k.adamw) {
    c.optimizer = OptimizerKind::AdamW;
    c.lr = 3e-3;
    c.weight_decay = 0.1;
    // Below every step's norm: the coefficient is max_norm / global norm, so
    // a rank clipping by its own range's norm moves its range too far.
    c.clip_grad_norm = 0.05;
  }
  return c;
}

// FP16 weights of the layout's padding (between and after tensors) that are
// not zero: a padding gradient that is not zero (say, left there by an
// in-place reduce-scatter's scratch) moves them, and enters the norm.
inline int nonzero_padding(const std::vector<lowp16>& weights, const ParameterRegistry& registry) {
  std::vector<char> tensor(weights.size(), 0);
  for (const ParameterTensor& t : registry.tensors())
    std::fill(tensor.begin() + t.offset, tensor.begin() + t.offset + t.count, 1);
  int bad = 0;
  for (size_t i = 0; i < weights.size(); ++i) bad += !tensor[i] && weights[i].bits != 0;
  return bad;
}

// Bitwise equality of a vector with rank 0's.
template <class T>
inline int differs_from_root(const std::vector<T>& mine) {
  std::vector<T> root = mine;
  MPI_Bcast(root.data(), static_cast<int>(root.size() * sizeof(T)), MPI_BYTE, 0, MPI_COMM_WORLD);
  return std::memcmp(root.data(), mine.data(), mine.size() * sizeof(T)) != 0;
}

// `c` trained at --zero `stage` one step per run() call, checked after
// every step: the step count advanced by one, the 16-bit weights bitwise
// rank 0's, the layout's padding still zero. Returns the failed checks
// (this rank's), the skipped steps and the final master weights.
struct StepwiseRun {
  int bad = 0;
  int64_t skipped = 0;
  std::vector<float> master;
};
inline StepwiseRun run_stepwise(const TrainConfig& c, int stage, Backend& backend, Communicator& comm,
                                const TrainTestData& data, const ParameterRegistry& registry) {
  TrainConfig stepwise = c;
  stepwise.zero_stage = stage;
  stepwise.stop_after_steps = 1;
  Trainer sharded(stepwise, backend, comm, data);
  sharded.prepare();
  StepwiseRun out;
  out.bad = differs_from_root(sharded.weights_lowp());
  for (int64_t step = 1; step <= c.steps; ++step) {
    const TrainSummary s = sharded.run();
    out.skipped += s.skipped_steps;
    out.bad += s.final_step != step;
    const std::vector<lowp16> weights = sharded.weights_lowp();
    out.bad += differs_from_root(weights);
    out.bad += nonzero_padding(weights, registry) > 0;
  }
  out.master = sharded.snapshot().master_weights_fp32;
  return out;
}

// Whether two training states differ (a restore, a resumed run).
inline int state_differs(const TrainState& a, const TrainState& b) {
  return (a.master_weights_fp32 != b.master_weights_fp32) + (a.momentum_fp32 != b.momentum_fp32) +
         (a.second_moment_fp32 != b.second_moment_fp32) + (a.step != b.step) + (a.optimizer_steps != b.optimizer_steps);
}

}  // namespace ddp::test::zero_cases
