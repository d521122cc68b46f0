// cpu_softmax_rows.h: the exponentials of the CPU's softmax rows (the causal
// attention softmax and the cross-entropy over the vocabulary), 8 lanes at a
// time with cpu_exp8.h's exp where the CPU has AVX and F16C (chosen as
// half_convert.h chooses), and the same operations a lane at a time
// elsewhere (the same bits). glibc's expf and the serial sum behind it
// took ~9% of a GPT step on CPU (perf).
#pragma once

#include <cstddef>

namespace ddp::cpu {

// out[j] = e^(in[j] - shift) for j < n, and returns their sum (in == out is
// allowed). shift is the row's maximum, so in[j] - shift <= 0; below -87 an
// exponential is taken as e^-87 (1.6e-38: 0 in FP16, and nothing in a sum
// that holds e^0 = 1). A NaN input gives a NaN output and sum. The 8-lane
// sum adds lane j into partial sum j % 8, then the partial sums in a fixed
// tree: the bits depend on n, never on the thread that runs the row.
float exp_shifted_sum(const float* in, float shift, float* out, size_t n);

}  // namespace ddp::cpu
