// lowp_codec.h: the working precision (`--precision fp16|bf16`) and the
// codec that reads and writes the 16-bit word (lowp16.h) in it.
//
// A backend or communicator is built for one precision; its kernels are
// templates over a codec (widen: exact, to FP32; narrow: FP32 to the word,
// round to nearest even), instantiated for both and chosen once per call
// by with_codec. Everything else (FP32 accumulation, the order of the
// operations) is the same code for both, so a BF16 kernel is its FP16 twin
// with other roundings.
#pragma once

#include <utility>

#include "kernels/bfloat16.h"
#include "kernels/half.h"
#include "kernels/host_device.h"

namespace ddp {

enum class Precision { Fp16, Bf16 };

// "fp16" or "bf16", as the command line spells them.
inline const char* precision_name(Precision p) { return p == Precision::Bf16 ? "bf16" : "fp16"; }

struct Fp16Codec {
  static constexpr Precision kPrecision = Precision::Fp16;
  static DDP_HD float widen(lowp16 x) { return half_to_float(x); }
  static DDP_HD lowp16 narrow(float f) { return to_half(f); }
};

struct Bf16Codec {
  static constexpr Precision kPrecision = Precision::Bf16;
  static DDP_HD float widen(lowp16 x) { return bfloat16_to_float(x); }
  static DDP_HD lowp16 narrow(float f) { return to_bfloat16(f); }
};

// fn(Fp16Codec{}) or fn(Bf16Codec{}): one dispatch, the loop inside fn
// compiled for the codec.
template <class Fn>
decltype(auto) with_codec(Precision p, Fn&& fn) {
  if (p == Precision::Bf16) return std::forward<Fn>(fn)(Bf16Codec{});
  return std::forward<Fn>(fn)(Fp16Codec{});
}

}  // namespace ddp
