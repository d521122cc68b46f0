// cpu_adamw.h: the CPU backend's AdamW loop over one range, the unit
// the AdamW op's CPU row (ops/adamw_cpu.cpp) hands to each thread of its pool. Like the
// loops of cpu_elementwise.h it has an AVX/F16C path (8 lanes) and the
// portable scalar path, both computing adamw_update_element (adamw_math.h)
// element by element with the same FP32 operations in the same order and no
// FMA, so their results are bit-identical.
#pragma once

#include <cstddef>

#include "kernels/adamw_math.h"
#include "kernels/optimizer_buffers.h"
#include "kernels/lowp_codec.h"

namespace ddp::cpu {

// adamw_update_element on elements [begin, end) of every buffer of `b`
// (indexed from the buffers' starts), then weights_lowp = fp16(master)
// there; the gradient is b.grads_fp32[i], or unscale_element(b.grads_lowp[i],
// inv_scale) when grads_fp32 is null.
void adamw_range(Precision p, const AdamWScalars& s, const AdamWBuffers& b, float inv_scale, size_t begin, size_t end);

}  // namespace ddp::cpu
