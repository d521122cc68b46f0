// lowp_convert.h: host arrays of the 16-bit word (lowp16.h) to FP32 and
// back in a given precision (lowp_codec.h): what the trainer converts on
// the host (a batch's features before upload, logits after download), in
// the format its backend computes in. FP16 through half_convert.h (F16C
// where the CPU has it), BF16 through bfloat16_convert.h; the same bits as
// each codec's scalar conversions.
#pragma once

#include <cstddef>

#include "kernels/lowp_codec.h"

namespace ddp {

void lowp_to_float_array(Precision p, const lowp16* src, float* dst, size_t count);
void float_to_lowp_array(Precision p, const float* src, lowp16* dst, size_t count);

}  // namespace ddp
