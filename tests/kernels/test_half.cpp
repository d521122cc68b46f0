// test_half.cpp: IEEE binary16 conversions, exhaustively where possible.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "kernels/half.h"
#include "kernels/half_convert.h"
#include "support/test_support.h"

namespace ddp {
namespace {

bool is_nan_bits(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }

// Reference float -> half via double arithmetic, independent of the bit-twiddling
// in half.h: find the nearest representable half by exhaustive comparison over
// the finite positive halves (binary search), ties to even mantissa.
uint16_t reference_float_to_half(float f) {
  if (std::isnan(f)) return 0x7e00;
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(f));
  if (a >= 65520.0) return sign | 0x7c00;
  // Positive finite halves 0x0000..0x7bff are monotonic in their bit pattern.
  uint16_t lo = 0, hi = 0x7bff;
  while (hi - lo > 1) {
    const uint16_t mid = static_cast<uint16_t>((lo + hi) / 2);
    if (half_bits_to_float_portable(mid) <= a)
      lo = mid;
    else
      hi = mid;
  }
  const double dlo = a - half_bits_to_float_portable(lo), dhi = half_bits_to_float_portable(hi) - a;
  uint16_t best;
  if (dlo < dhi)
    best = lo;
  else if (dhi < dlo)
    best = hi;
  else
    best = (lo & 1) ? hi : lo;
  return sign | best;
}

TEST(HalfConversion, AllBitPatternsRoundTripExactly) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const uint16_t h = static_cast<uint16_t>(bits);
    const float f = half_bits_to_float_portable(h);
    const uint16_t back = float_to_half_bits_portable(f);
    if (is_nan_bits(h)) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << bits;
      EXPECT_TRUE(is_nan_bits(back)) << std::hex << bits;
    } else {
      ASSERT_EQ(back, h) << "half 0x" << std::hex << bits << " -> " << f;
    }
  }
}

TEST(HalfConversion, HalfToFloatMatchesDefinition) {
  for (uint32_t bits = 0; bits < 0x7c00; ++bits) {  // every positive finite half
    const int e = (bits >> 10) & 0x1f, m = bits & 0x3ff;
    const double want = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
    ASSERT_EQ(static_cast<double>(half_bits_to_float_portable(static_cast<uint16_t>(bits))), want) << bits;
    ASSERT_EQ(static_cast<double>(half_bits_to_float_portable(static_cast<uint16_t>(bits | 0x8000))), -want);
  }
}

TEST(HalfConversion, TiesRoundToEven) {
  // Halfway between 1.0 (0x3c00) and the next half 1+2^-10 (0x3c01): even is 0x3c00.
  EXPECT_EQ(float_to_half_bits_portable(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  // Halfway between 0x3c01 and 0x3c02: even is 0x3c02.
  EXPECT_EQ(float_to_half_bits_portable(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  // Just above a tie rounds up.
  EXPECT_EQ(float_to_half_bits_portable(std::nextafter(1.0f + std::ldexp(1.0f, -11), 2.0f)), 0x3c01);
  // Subnormal ties: 2^-25 is halfway between 0 and the smallest subnormal: to 0.
  EXPECT_EQ(float_to_half_bits_portable(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(float_to_half_bits_portable(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  // 3 * 2^-25 is halfway between subnormals 1 and 2: even is 2.
  EXPECT_EQ(float_to_half_bits_portable(3 * std::ldexp(1.0f, -25)), 0x0002);
}

TEST(HalfConversion, OverflowBoundaryInfAndNan) {
  EXPECT_EQ(float_to_half_bits_portable(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half_bits_portable(65519.99f), 0x7bff);  // below the halfway point to 65536
  EXPECT_EQ(float_to_half_bits_portable(65520.0f), 0x7c00);   // the tie rounds to even = Inf
  EXPECT_EQ(float_to_half_bits_portable(-65520.0f), 0xfc00);
  EXPECT_EQ(float_to_half_bits_portable(1e10f), 0x7c00);
  EXPECT_EQ(float_to_half_bits_portable(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(float_to_half_bits_portable(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_TRUE(is_nan_bits(float_to_half_bits_portable(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(float_to_half_bits_portable(-0.0f), 0x8000);
  // Smallest normal and largest subnormal.
  EXPECT_EQ(float_to_half_bits_portable(std::ldexp(1.0f, -14)), 0x0400);
  EXPECT_EQ(float_to_half_bits_portable(std::ldexp(1023.0f, -24)), 0x03ff);
}

TEST(HalfConversion, RandomFloatsMatchIndependentReference) {
  std::mt19937_64 rng(test::test_seed());
  SCOPED_TRACE("seed " + std::to_string(test::test_seed()));
  for (int i = 0; i < 200000; ++i) {
    // Random bit patterns over the range that maps to finite halves and subnormals.
    uint32_t bits = static_cast<uint32_t>(rng());
    bits = (bits & 0x80000000u) | (0x30000000u + (bits & 0x7fffffffu) % (0x47900000u - 0x30000000u));
    float f;
    std::memcpy(&f, &bits, 4);
    ASSERT_EQ(float_to_half_bits_portable(f), reference_float_to_half(f)) << "float " << f;
  }
}

TEST(HalfConversion, F16cPathMatchesPortablePath) {
  if (!f16c_available()) GTEST_SKIP() << "this CPU has no F16C; only the portable path exists";
  std::mt19937_64 rng(test::test_seed());
  std::vector<float> f(100003);
  for (auto& x : f) {
    uint32_t bits = static_cast<uint32_t>(rng());
    std::memcpy(&x, &bits, 4);  // every float class, NaN and Inf included
  }
  std::vector<lowp16> fast(f.size()), slow(f.size());
  float_to_half_array(f.data(), fast.data(), f.size());
  set_f16c_enabled(false);
  float_to_half_array(f.data(), slow.data(), f.size());
  set_f16c_enabled(true);
  for (size_t i = 0; i < f.size(); ++i) {
    if (std::isnan(f[i])) {
      ASSERT_TRUE(is_nan_bits(fast[i].bits) && is_nan_bits(slow[i].bits));
    } else {
      ASSERT_EQ(fast[i].bits, slow[i].bits) << f[i];
    }
  }
  std::vector<lowp16> all(65536);
  for (uint32_t b = 0; b < 65536; ++b) all[b].bits = static_cast<uint16_t>(b);
  std::vector<float> wide_fast(65536), wide_slow(65536);
  half_to_float_array(all.data(), wide_fast.data(), all.size());
  set_f16c_enabled(false);
  half_to_float_array(all.data(), wide_slow.data(), all.size());
  set_f16c_enabled(true);
  for (uint32_t b = 0; b < 65536; ++b) {
    if (is_nan_bits(static_cast<uint16_t>(b))) continue;
    ASSERT_EQ(std::memcmp(&wide_fast[b], &wide_slow[b], 4), 0) << b;
  }
}

}  // namespace
}  // namespace ddp
