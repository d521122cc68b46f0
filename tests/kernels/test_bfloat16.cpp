// test_bfloat16.cpp: bfloat16 conversions (kernels/bfloat16.h), exhaustively
// over the 65,536 bfloat16 values and at every rounding boundary between
// them, against an independent reference in double arithmetic.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/bfloat16.h"
#include "kernels/bfloat16_convert.h"
#include "support/test_support.h"

namespace ddp {
namespace {

bool is_nan_bits(uint16_t b) { return (b & 0x7f80u) == 0x7f80u && (b & 0x7fu) != 0; }

float float_of_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// A bfloat16's value from its definition: (-1)^s x 2^(e - 127) x 1.m, or
// 2^-126 x 0.m for e = 0, with m the 7 stored bits over 128.
double defined_value(uint16_t b) {
  const int e = (b >> 7) & 0xff, m = b & 0x7f;
  const double magnitude = e == 0 ? std::ldexp(m, -133) : std::ldexp(128 + m, e - 134);
  return (b & 0x8000u) ? -magnitude : magnitude;
}

// Reference float -> bfloat16 by distances in double, independent of the
// carry trick in bfloat16.h: the two candidates around |f| (its bits
// truncated, and the next bfloat16 up), the nearer wins, a tie goes to the
// even one; past the largest finite value's rounding boundary, Inf.
uint16_t reference_float_to_bfloat16(float f) {
  if (std::isnan(f)) return 0x7fc0;
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(f));
  if (std::isinf(f)) return sign | 0x7f80;
  const uint16_t lo = static_cast<uint16_t>(float_to_bits(static_cast<float>(a)) >> 16);
  const uint16_t hi = static_cast<uint16_t>(lo + 1);
  const double v_lo = defined_value(lo);
  const double v_hi = hi == 0x7f80 ? std::ldexp(1.0, 128) : defined_value(hi);  // Inf's place in the spacing
  const double d_lo = a - v_lo, d_hi = v_hi - a;
  const uint16_t best = d_lo < d_hi ? lo : d_hi < d_lo ? hi : ((lo & 1u) ? hi : lo);
  return sign | best;
}

TEST(Bfloat16Conversion, AllBitPatternsRoundTripExactly) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const uint16_t b = static_cast<uint16_t>(bits);
    const float f = bfloat16_bits_to_float(b);
    const uint16_t back = float_to_bfloat16_bits_portable(f);
    if (is_nan_bits(b)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << bits;
      ASSERT_TRUE(is_nan_bits(back)) << std::hex << bits;
      ASSERT_EQ(back & 0x8000u, b & 0x8000u) << "a NaN's sign, 0x" << std::hex << bits;
    } else {
      ASSERT_EQ(back, b) << "bfloat16 0x" << std::hex << bits << " -> " << f;
    }
  }
}

TEST(Bfloat16Conversion, WideningMatchesTheDefinition) {
  for (uint32_t bits = 0; bits < 0x7f80; ++bits) {  // every positive finite bfloat16
    const uint16_t b = static_cast<uint16_t>(bits);
    ASSERT_EQ(static_cast<double>(bfloat16_bits_to_float(b)), defined_value(b)) << bits;
    ASSERT_EQ(static_cast<double>(bfloat16_bits_to_float(b | 0x8000u)), -defined_value(b)) << bits;
  }
}

// Every boundary: for each pair of neighbouring bfloat16 values (either
// sign), the float at the tie and the floats one FP32 step either side of
// it, against the reference.
TEST(Bfloat16Conversion, EveryTieAndItsNeighboursRoundAsTheReference) {
  for (uint32_t kept = 0; kept < 0x7f80; ++kept) {
    for (uint32_t sign : {0u, 0x80000000u}) {
      const uint32_t tie = sign | (kept << 16) | 0x8000u;
      for (uint32_t bits : {tie - 1, tie, tie + 1}) {
        const float f = float_of_bits(bits);
        ASSERT_EQ(float_to_bfloat16_bits_portable(f), reference_float_to_bfloat16(f)) << std::hex << bits;
      }
    }
  }
}

TEST(Bfloat16Conversion, RandomFloatsOfEveryClassMatchTheReference) {
  std::mt19937_64 rng(test::test_seed());
  SCOPED_TRACE("seed " + std::to_string(test::test_seed()));
  for (int i = 0; i < 1000000; ++i) {
    const float f = float_of_bits(static_cast<uint32_t>(rng()));
    const uint16_t got = float_to_bfloat16_bits_portable(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(is_nan_bits(got)) << f;
    } else {
      ASSERT_EQ(got, reference_float_to_bfloat16(f)) << "float bits 0x" << std::hex << float_to_bits(f);
    }
  }
}

TEST(Bfloat16Conversion, SpecialValuesSubnormalsAndOverflow) {
  EXPECT_EQ(float_to_bfloat16_bits_portable(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bfloat16_bits_portable(-0.0f), 0x8000);
  EXPECT_EQ(float_to_bfloat16_bits_portable(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(float_to_bfloat16_bits_portable(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_TRUE(is_nan_bits(float_to_bfloat16_bits_portable(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(is_nan_bits(float_to_bfloat16_bits_portable(float_of_bits(0x7f800001u))));  // payload below the cut
  // 1 + 2^-8 is the tie between 1 and 1 + 2^-7: to even (1); one FP32 step up goes up.
  EXPECT_EQ(float_to_bfloat16_bits_portable(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(float_to_bfloat16_bits_portable(std::nextafter(1.0f + std::ldexp(1.0f, -8), 2.0f)), 0x3f81);
  EXPECT_EQ(float_to_bfloat16_bits_portable(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);  // the odd one's tie: up
  // FP32 subnormals become bfloat16 subnormals: the smallest FP32 one rounds to 0, 2^-133 is bfloat16's.
  EXPECT_EQ(float_to_bfloat16_bits_portable(float_of_bits(0x00000001u)), 0x0000);
  EXPECT_EQ(float_to_bfloat16_bits_portable(std::ldexp(1.0f, -133)), 0x0001);
  EXPECT_EQ(float_to_bfloat16_bits_portable(std::numeric_limits<float>::min()), 0x0080);
  // The largest finite: kept; the float at its tie with "2^128" rounds to Inf (odd mantissa, to even).
  EXPECT_EQ(float_to_bfloat16_bits_portable(kBfloat16Max), 0x7f7f);
  EXPECT_EQ(float_to_bfloat16_bits_portable(float_of_bits(0x7f7f7fffu)), 0x7f7f);
  EXPECT_EQ(float_to_bfloat16_bits_portable(float_of_bits(0x7f7f8000u)), 0x7f80);
  EXPECT_EQ(float_to_bfloat16_bits_portable(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(bfloat16_bits_to_float(0x7f7f), kBfloat16Max);
}

TEST(Bfloat16Conversion, BulkConvertersMatchTheScalarOnes) {
  std::mt19937_64 rng(test::test_seed());
  std::vector<float> f(100003), widened(f.size());
  for (float& x : f) x = float_of_bits(static_cast<uint32_t>(rng()));
  std::vector<lowp16> narrowed(f.size(), lowp16{0xdead});
  float_to_bfloat16_array(f.data(), narrowed.data(), f.size());
  bfloat16_to_float_array(narrowed.data(), widened.data(), f.size());
  for (size_t i = 0; i < f.size(); ++i) {
    ASSERT_EQ(narrowed[i].bits, float_to_bfloat16_bits_portable(f[i])) << i;
    ASSERT_EQ(float_to_bits(widened[i]), static_cast<uint32_t>(narrowed[i].bits) << 16) << i;
  }
}

}  // namespace
}  // namespace ddp
