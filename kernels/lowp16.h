// lowp16.h: the 16-bit word the working weights, activations and gradients
// are stored in, and the FP32 bit helpers both 16-bit formats use.
//
// `lowp16` is 16 bits of storage and nothing else: which format the bits
// are in (FP16, half.h; BF16, bfloat16.h) is the precision of the backend
// and communicator that own the buffer, not a property of the type, so one
// buffer type, one model and one trainer serve both precisions. Code that
// reads or writes the bits names the format it uses (to_half,
// half_to_float; to_bfloat16, bfloat16_bits_to_float).
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/host_device.h"

namespace ddp {

struct lowp16 {
  uint16_t bits;
};
static_assert(sizeof(lowp16) == 2, "lowp16 must be 2 bytes");

DDP_HD float bits_to_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

DDP_HD uint32_t float_to_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}

}  // namespace ddp
