// sharded_state.h: the FP32 state of a --zero run (ParameterStore::owned:
// each rank holds one range of the flat layout) made whole for the files
// that hold it whole (checkpoints, --save-weights), and whole state agreed
// on before it is cut into ranges.
//
// A checkpoint is one file in the unsharded format, so any checkpoint
// resumes at any world size, stage and shard group size. It is gathered
// (inside the rank's shard group, which holds the whole state), not written
// collectively: every rank's range is all-gathered into a transient whole
// buffer on the backend (one state at a time, freed after), downloaded,
// and rank 0 writes, as with --zero 0. That costs one whole FP32 state
// (4 bytes per parameter) per rank for the moment of a checkpoint, the
// price of keeping a single file any run can read; a collective write
// (each rank its byte range of one file) would avoid it and is left for
// when a model's state no longer fits once.
#pragma once

#include <cstddef>
#include <vector>

#include "comm/communicator.h"
#include "comm/shard_layout.h"
#include "kernels/buffer.h"
#include "trainer/params/parameter_store.h"

namespace ddp {

// Elements per alignment unit of the ZeRO ranges: 64 (128 bytes of FP16,
// 256 of FP32), so every range but the last starts on a boundary any
// vectorised kernel and NCCL's staging like.
constexpr size_t kZeroShardAlignElements = 64;

// The ranges of a flat layout of `flat_count` elements over `world` ranks
// (a shard group's: Communicator::shard_size).
ShardLayout zero_shard_layout(size_t flat_count, int world);

// The layout gather_fp32_state all-gathers an FP32 buffer of `layout`'s
// ranges with: the same ranges counted in FP16 elements, two per value.
// Every range twice as long, it is the widest layout a sharded run moves
// (its steps' reduce-scatters and gathers are of `layout` or of slices of
// it), so a run that captures its step reserves this one beforehand
// (Communicator::reserve_shard_staging): its checkpoints gather after the
// capture, where the transport's staging may no longer grow.
ShardLayout fp32_state_gather_layout(const ShardLayout& layout);

// `state` (one of params' FP32 buffers, its owned range) whole, on every
// rank. Unsharded: a download. Sharded: a collective every rank calls.
std::vector<float> gather_fp32_state(Communicator& comm, const ParameterStore& params, const Buffer<float>& state);

// Every rank ends with rank 0's `flat` (a collective; `backend` holds the
// transient buffer the transport needs). For state each rank loads itself
// and then cuts to its range: the ranges must come from one source.
void agree_with_root(Communicator& comm, Backend& backend, std::vector<float>& flat);

}  // namespace ddp
