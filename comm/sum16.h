// sum16.h: the element-wise sums of 16-bit floats that the transports' FP16
// and BF16 reductions make on the host (MPI's user-defined operations):
// b[i] = round(float(a[i]) + float(b[i])), the widening exact, the add in
// FP32, one rounding to nearest even per pairwise step, as NCCL's FP16 and
// BF16 sums round. MPI calls them on every received segment, so they run
// near memory speed: 16 lanes per step in AVX registers where the CPU has
// them, through the CPU kernels' own 8-lane conversions
// (kernels/cpu/cpu_lowp_simd.h: F16C for FP16, SSE4.1 integer halves and
// the carry of bfloat16.h for BF16), the portable scalar definitions
// otherwise and for the tails.
// Both paths give the same bits, except a NaN's payload (it stays a NaN).
#pragma once

#include <cstddef>

#include "kernels/bfloat16.h"
#include "kernels/half.h"

namespace ddp {

void sum_into_fp16(const lowp16* a, lowp16* b, size_t count);
void sum_into_bf16(const lowp16* a, lowp16* b, size_t count);

// Whether the vector paths run on this CPU (F16C and AVX), and, for
// tests, a switch to the scalar paths (false) or back to detection (true).
bool sum16_vector_paths_available();
void set_sum16_vector_paths_enabled(bool enabled);

}  // namespace ddp
