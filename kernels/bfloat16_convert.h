// bfloat16_convert.h: bulk host conversions between bfloat16 and FP32
// (bfloat16.h's scalar rules, element by element: integer operations the
// compiler vectorises), for the CPU backend's widening of BF16 operands.
#pragma once

#include <cstddef>

#include "kernels/bfloat16.h"

namespace ddp {

void bfloat16_to_float_array(const lowp16* src, float* dst, size_t count);
void float_to_bfloat16_array(const float* src, lowp16* dst, size_t count);

}  // namespace ddp
