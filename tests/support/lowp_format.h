// lowp_format.h: the working precision as the precision-generic tests see
// it: a test written once runs for FP16 and BF16 (INSTANTIATE over
// kBothPrecisions), reading and writing its buffers through the format's
// codec and holding results to the format's tolerance.
//
// Tolerance: a 16-bit result of an FP32 computation is within half an ulp
// of its format (2^-11 relative for FP16, 2^-8 for BF16's 7 stored mantissa
// bits) of the FP32 value; as kFp16RelTol does for FP16, we allow 2 ulps
// relative (2^-10 and 2^-7) plus each test's absolute floor.
#pragma once

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "kernels/lowp_codec.h"
#include "support/test_support.h"

namespace ddp::test {

constexpr double kBf16RelTol = 2.0 / 256.0;

struct LowpFormat {
  Precision precision = Precision::Fp16;

  float widen(lowp16 x) const {
    return with_codec(precision, [x](auto codec) { return codec.widen(x); });
  }
  lowp16 narrow(float f) const {
    return with_codec(precision, [f](auto codec) { return codec.narrow(f); });
  }
  // f rounded to the format and back.
  float rounded(float f) const { return widen(narrow(f)); }
  double rel_tol() const { return precision == Precision::Bf16 ? kBf16RelTol : kFp16RelTol; }
  // Uniform in [lo, hi], rounded to the format.
  std::vector<lowp16> random(std::mt19937_64& rng, size_t count, float lo = -1.0f, float hi = 1.0f) const {
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<lowp16> out(count);
    for (lowp16& x : out) x = narrow(dist(rng));
    return out;
  }
  std::vector<float> widened(const std::vector<lowp16>& xs) const {
    std::vector<float> out(xs.size());
    for (size_t i = 0; i < xs.size(); ++i) out[i] = widen(xs[i]);
    return out;
  }
  std::vector<double> widened_doubles(const std::vector<lowp16>& xs) const {
    std::vector<double> out(xs.size());
    for (size_t i = 0; i < xs.size(); ++i) out[i] = widen(xs[i]);
    return out;
  }
  uint16_t inf_bits() const { return precision == Precision::Bf16 ? 0x7f80 : 0x7c00; }
  uint16_t neg_inf_bits() const { return static_cast<uint16_t>(inf_bits() | 0x8000u); }
  uint16_t nan_bits() const { return precision == Precision::Bf16 ? 0x7fc0 : 0x7e00; }
  uint16_t max_bits() const { return precision == Precision::Bf16 ? 0x7f7f : 0x7bff; }
  // +-0, +-Inf, a quiet NaN, +-the smallest subnormal, the largest finite.
  std::vector<uint16_t> special_bits() const {
    if (precision == Precision::Bf16) return {0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0x0001, 0x8001, 0x7f7f};
    return {0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x0001, 0x8001, 0x7bff};
  }
  // kPoisonHalfBits is a NaN in both formats: a forgotten output fails any
  // comparison.
  static std::vector<lowp16> poison(size_t count) { return poison_halves(count); }
};

inline const Precision kBothPrecisions[] = {Precision::Fp16, Precision::Bf16};

// gtest's name for an instantiation: "fp16" or "bf16".
inline std::string precision_test_name(const ::testing::TestParamInfo<Precision>& info) {
  return precision_name(info.param);
}

}  // namespace ddp::test
