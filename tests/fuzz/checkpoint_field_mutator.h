// checkpoint_field_mutator.h: the field-aware mutation of fuzz_checkpoint's
// custom mutator. Byte mutations of a checkpoint almost never survive the
// CRC, and the harness's re-sealed copy changes raw bytes, so a value such as
// "epoch = -1, everything else sound" is rarely produced. This mutates one
// decoded field of a TrainState to a value chosen to sit on or next to a
// bound (negative, zero, huge, NaN, Inf, INT64_MIN/MAX, a single non-finite
// weight, another width), optionally after making the state consistent
// first, so that validate_checkpoint_contents sees one bad field at a time.
#pragma once

#include <random>

#include "trainer/checkpoint/train_state.h"

namespace ddp::fuzz {

using MutatorRng = std::mt19937_64;

// Largest parameter count the mutator resizes the buffers to (the harness's
// -max_len is 256 KiB; a larger state is not written back).
constexpr uint64_t kMaxMutatedParameters = 1 << 14;

// Sets every field to a value the trainer could have written, keeping as
// much of `s` as fits (the shape, when it is sound and small).
void make_consistent(TrainState& s, MutatorRng& rng);

// Changes one field of `s` (chosen by rng) to an interesting value.
void mutate_one_field(TrainState& s, MutatorRng& rng);

}  // namespace ddp::fuzz
