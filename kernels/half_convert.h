// half_convert.h: bulk host conversions between FP16 and FP32.
// Uses F16C (vcvtph2ps / vcvtps2ph with round-to-nearest-even) when the CPU
// reports it at run time, else the portable routines in half.h; both give
// bit-identical results, which tests/kernels/test_half.cpp checks.
#pragma once

#include <cstddef>

#include "kernels/half.h"

namespace ddp {

void half_to_float_array(const lowp16* src, float* dst, size_t count);
void float_to_half_array(const float* src, lowp16* dst, size_t count);

// True when the F16C fast path is in use on this CPU.
bool f16c_available();

// For tests: force the portable path (false) or restore auto-detection (true).
void set_f16c_enabled(bool enabled);

}  // namespace ddp
