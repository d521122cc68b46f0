// lowp_convert.cpp
#include "kernels/lowp_convert.h"

#include "kernels/bfloat16_convert.h"
#include "kernels/half_convert.h"

namespace ddp {

void lowp_to_float_array(Precision p, const lowp16* src, float* dst, size_t count) {
  if (p == Precision::Bf16) return bfloat16_to_float_array(src, dst, count);
  half_to_float_array(src, dst, count);
}

void float_to_lowp_array(Precision p, const float* src, lowp16* dst, size_t count) {
  if (p == Precision::Bf16) return float_to_bfloat16_array(src, dst, count);
  float_to_half_array(src, dst, count);
}

}  // namespace ddp
