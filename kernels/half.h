// half.h: IEEE binary16 (FP16) in the 16-bit word (lowp16.h), on host and
// device.
//
// Arithmetic is done in FP32 after an exact widening (half -> float) and
// every narrowing rounds to nearest, ties to even (float -> half), as the
// numerics contract requires. On the device the CUDA intrinsics do the conversion; on the host a portable
// bit-exact routine does, and the bulk converters in half_convert.h use F16C
// when the CPU has it.
#pragma once

#include <cstdint>

#include "kernels/host_device.h"
#include "kernels/lowp16.h"

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#endif

namespace ddp {

// Portable float -> half, round to nearest even; Inf stays Inf, NaN stays a
// quiet NaN with the sign kept, values >= 65520 round to Inf.
DDP_HD uint16_t float_to_half_bits_portable(float f) {
  const uint32_t x = float_to_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // Inf or NaN
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x0200u | ((abs >> 13) & 0x3ffu) : 0u));
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520: overflow to Inf
  if (abs < 0x38800000u) {
    // Result is subnormal (or zero): value = abs_float; scale by 2^24 and
    // round the integer mantissa to nearest even.
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);  // < 2^-25: rounds to zero
    const uint32_t exp = abs >> 23;                             // biased float exponent, 102..112
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - exp;  // 14..24
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  // Normal: rebias exponent, round 13 dropped mantissa bits to nearest even.
  uint32_t h = ((abs - 0x38000000u) >> 13);
  const uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // carry may ripple into exponent: correct
  return static_cast<uint16_t>(sign | h);
}

// Exact half -> float.
DDP_HD float half_bits_to_float_portable(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1fu) return bits_to_float(sign | 0x7f800000u | (mant << 13));
  if (exp != 0) return bits_to_float(sign | ((exp + 112u) << 23) | (mant << 13));
  if (mant == 0) return bits_to_float(sign);
  // Subnormal: normalise.
  uint32_t e = 113u;
  while ((mant & 0x400u) == 0) {
    mant <<= 1;
    --e;
  }
  return bits_to_float(sign | (e << 23) | ((mant & 0x3ffu) << 13));
}

DDP_HD lowp16 to_half(float f) {
#if defined(__CUDA_ARCH__)
  return lowp16{__half_as_ushort(__float2half_rn(f))};
#else
  return lowp16{float_to_half_bits_portable(f)};
#endif
}

DDP_HD float half_to_float(lowp16 h) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(h.bits));
#else
  return half_bits_to_float_portable(h.bits);
#endif
}

DDP_HD bool is_finite_float(float f) { return (float_to_bits(f) & 0x7f800000u) != 0x7f800000u; }

constexpr float kHalfMax = 65504.0f;

}  // namespace ddp
