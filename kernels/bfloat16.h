// bfloat16.h: bfloat16 in the 16-bit word (lowp16.h), on host and device,
// beside FP16 (half.h): the working precision of `--precision bf16`.
//
// bfloat16 is the top half of an FP32: 1 sign bit, FP32's 8 exponent bits,
// 7 mantissa bits. Widening is exact (the 16 bits shifted up); narrowing
// rounds to nearest, ties to even, over the 16 dropped bits, so FP32's
// subnormals become bfloat16's and values past the largest finite one
// (about 3.39e38) round to Inf. A NaN stays a quiet NaN with its sign and
// the top of its payload. PyTorch's scalar conversion (c10::BFloat16)
// rounds the same way; its NaN is 0x7fc0 (0xffff on its vectorised path),
// so NaNs compare as a class, not as bits (tests/python).
#pragma once

#include <cstdint>

#include "kernels/lowp16.h"  // bits_to_float, float_to_bits
#include "kernels/host_device.h"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#endif

namespace ddp {

// Portable float -> bfloat16, round to nearest even.
DDP_HD uint16_t float_to_bfloat16_bits_portable(float f) {
  const uint32_t x = float_to_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x0040u);  // NaN: quiet
  // Adding 0x7fff plus the kept part's lowest bit carries into the kept
  // half exactly when the dropped half is above the tie, or at the tie
  // with an odd kept half; a carry out of the mantissa bumps the exponent
  // (to Inf past the largest finite value), as rounding should.
  const uint32_t lsb = (x >> 16) & 1u;
  return static_cast<uint16_t>((x + 0x7fffu + lsb) >> 16);
}

// Exact bfloat16 -> float.
DDP_HD float bfloat16_bits_to_float(uint16_t b) { return bits_to_float(static_cast<uint32_t>(b) << 16); }

DDP_HD lowp16 to_bfloat16(float f) {
#if defined(__CUDA_ARCH__)
  return lowp16{__bfloat16_as_ushort(__float2bfloat16_rn(f))};
#else
  return lowp16{float_to_bfloat16_bits_portable(f)};
#endif
}

DDP_HD float bfloat16_to_float(lowp16 b) { return bfloat16_bits_to_float(b.bits); }

// The largest finite bfloat16: (2 - 2^-7) x 2^127.
constexpr float kBfloat16Max = 3.38953139e38f;

}  // namespace ddp
