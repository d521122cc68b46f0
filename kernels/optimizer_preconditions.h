// optimizer_preconditions.h: the buffers an optimizer step must be given,
// checked by both rows alike (ops/sgd_*.cpp|cu, ops/adamw_*.cpp|cu), so a
// call one backend accepts the other accepts too. Plain C++: its tests run without a GPU.
//
// An empty range (count 0) reads and writes nothing, so there every
// pointer may be null: a rank whose --zero range is empty (a model smaller
// than one alignment unit per rank, comm/shard_layout.h) holds null state
// buffers and still takes every step with its peers. The count is looked
// at before any pointer for that reason.
#pragma once

#include <cstddef>

#include "kernels/elementwise_math.h"
#include "kernels/optimizer_buffers.h"

namespace ddp {

// Throws ddp::Error, for count > 0, when `grads` holds neither FP32 nor
// FP16 gradients, or when params.momentum != 0 comes without a momentum
// buffer (a step that kept none would drop the momentum without a word).
void require_sgd_buffers(const SgdParams& params, const SgdGrads& grads, const float* momentum_fp32, size_t count);

// Throws ddp::Error, for count > 0, when `buffers` holds neither FP32 nor
// FP16 gradients.
void require_adamw_buffers(const AdamWBuffers& buffers, size_t count);

}  // namespace ddp
