// bfloat16_convert.cpp
#include "kernels/bfloat16_convert.h"

namespace ddp {

void bfloat16_to_float_array(const lowp16* src, float* dst, size_t count) {
  for (size_t i = 0; i < count; ++i) dst[i] = bfloat16_bits_to_float(src[i].bits);
}

void float_to_bfloat16_array(const float* src, lowp16* dst, size_t count) {
  for (size_t i = 0; i < count; ++i) dst[i].bits = float_to_bfloat16_bits_portable(src[i]);
}

}  // namespace ddp
