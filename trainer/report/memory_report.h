// memory_report.h: what each rank holds, by state class, next to the ZeRO
// paper's formula for the run's stage (Rajbhandari et al. 2020, section 5:
// Psi parameters, K bytes of optimizer state per parameter, N ranks).
//
// The formula per rank, with K = 4 (FP32 master) + the optimizer's state
// (SGD momentum 4, AdamW's two moments 8: K = 8 or 12, the paper's Adam):
//   stage 0: (2 + 2 + K) Psi       stage 1: (2 + 2) Psi + K Psi / N
//   stage 2: 2 Psi + (2 + K) Psi / N   stage 3: (2 + 2 + K) Psi / N
// Ours adds, sharded like K: the unscaled FP32 gradients (4 bytes: read by
// clipping and the logged norm) and AdamW's per-element decay mask (1
// byte). The measured classes exceed formula + extras only by the layout's
// padding (tensors start at multiples of 8 elements; ranges are whole units
// of 64) and by one alignment unit of imbalance between ranks.
#pragma once

#include <cstddef>
#include <string>

#include "comm/communicator.h"
#include "trainer/params/parameter_store.h"
#include "trainer/io/json_writer.h"

namespace ddp {

struct StateBytes {
  Precision precision = Precision::Fp16;  // the 16-bit weights' and gradients' format (fp16_* below: either)
  size_t fp32_masters = 0;
  size_t optimizer_state = 0;  // SGD momentum / AdamW moments, and AdamW's decay mask
  size_t fp32_gradients = 0;
  size_t fp16_weights = 0;
  size_t fp16_gradients = 0;
  // Not state: stage 2's gradient staging and stage 3's gather slots, held
  // now (trainer/zero/layer_shards.h).
  size_t zero_buffers = 0;
  bool grads_whole_for_accumulation = false;  // --zero >= 2 with --grad-accum > 1 (not the formula's)
  size_t total() const { return fp32_masters + optimizer_state + fp32_gradients + fp16_weights + fp16_gradients; }
};

// Each class's largest value over the ranks (a collective): the rank that
// needs the most is the one that must fit.
StateBytes largest_over_ranks(Communicator& comm, const StateBytes& mine);

// What this rank's store holds now.
StateBytes measured_state_bytes(const ParameterStore& params);

// The paper's formula for `parameters` (Psi, no padding) and ours on top of
// it (FP32 gradients, decay mask), per rank; `adamw` picks K. `shards`:
// the ranks the state is cut over (the world, or a hybrid run's shard
// group: each replica holds the whole state again).
struct ZeroFormula {
  double paper_bytes = 0;
  double ours_bytes = 0;  // paper_bytes + the extras
};
ZeroFormula zero_formula_bytes(int stage, int shards, size_t parameters, bool adamw);

// Host memory one rank needs at least, before its first step: the whole
// FP32 weights (4 bytes per parameter: every rank draws or reads the initial
// values whole, and a checkpoint gathers each state whole) and, where the
// state lives in host memory (CPU ranks), the formula's state with ours.
double host_bytes_needed(int stage, int shards, size_t parameters, bool adamw, bool state_on_host);

// "" when host_bytes_needed fits `physical_bytes`, else the one-line
// problem, naming the parameter count, the need, the memory and the fix
// (sharding that goes further: --zero 3; over the whole `world` where
// hybrid groups of `shards` ranks each hold the state).
std::string host_memory_problem(int stage, int shards, int world, size_t parameters, bool adamw, bool state_on_host,
                                size_t physical_bytes);

// The banner's line: the classes (each the largest rank's), the rest of the
// trainer's allocations (activations, scratch, batch slots, communication
// staging: `other_bytes`) and the formula. `shard_size` below `world`: a
// hybrid run's shard groups (said in the line).
std::string memory_line(int stage, int world, int shard_size, const StateBytes& state, size_t other_bytes,
                        const ZeroFormula& f);
// The same as a metrics record ("event": "memory").
JsonRecord memory_record(int stage, int world, int shard_size, const StateBytes& state, size_t other_bytes,
                         const ZeroFormula& f);

}  // namespace ddp
