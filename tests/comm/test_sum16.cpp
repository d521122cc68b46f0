// test_sum16.cpp: the transports' 16-bit sums (comm/sum16.h): the vector
// paths give the scalar definition's bits (NaNs as a class) over random bit
// patterns of every class, at every length around the 16-lane step, and
// the scalar definition is FP32's add rounded once (checked against a
// double-precision sum and the conversions' own tested rounding).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "comm/sum16.h"
#include "kernels/lowp_codec.h"
#include "support/test_support.h"

namespace ddp {
namespace {

std::vector<lowp16> random_bits(std::mt19937_64& rng, size_t n) {
  std::vector<lowp16> v(n);
  for (lowp16& x : v) x.bits = static_cast<uint16_t>(rng());
  return v;
}

// The definition, spelled out: FP32 add of the exact widenings, one rounding.
template <class Codec, class Sum>
int wrong_elements(Sum sum, uint64_t seed) {
  std::mt19937_64 rng(seed);
  int wrong = 0;
  for (size_t n : {size_t{0}, size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{31}, size_t{33}, size_t{4099}}) {
    const std::vector<lowp16> a = random_bits(rng, n), b0 = random_bits(rng, n);
    std::vector<lowp16> b = b0;
    sum(a.data(), b.data(), n);
    for (size_t i = 0; i < n; ++i) {
      const float want = Codec::widen(b0[i]) + Codec::widen(a[i]);
      const bool nan_ok = std::isnan(want) && std::isnan(Codec::widen(b[i]));
      wrong += !nan_ok && b[i].bits != Codec::narrow(want).bits;
    }
  }
  return wrong;
}

TEST(Sum16, Fp16SumIsTheFp32AddRoundedOnceOnEveryPath) {
  for (bool vector : {true, false}) {
    set_sum16_vector_paths_enabled(vector);
    EXPECT_EQ(wrong_elements<Fp16Codec>(sum_into_fp16, test::test_seed()), 0) << (vector ? "vector" : "scalar");
  }
  set_sum16_vector_paths_enabled(true);
}

TEST(Sum16, Bf16SumIsTheFp32AddRoundedOnceOnEveryPath) {
  for (bool vector : {true, false}) {
    set_sum16_vector_paths_enabled(vector);
    EXPECT_EQ(wrong_elements<Bf16Codec>(sum_into_bf16, test::test_seed()), 0) << (vector ? "vector" : "scalar");
  }
  set_sum16_vector_paths_enabled(true);
}

// Hand-checked cases: a tie after the add rounds to even, overflow to Inf,
// Inf + (-Inf) is NaN, subnormals add exactly.
TEST(Sum16, Bf16TiesOverflowAndSpecials) {
  // 1 + 2^-8 is the tie between 1 and 1 + 2^-7: even, 1.
  std::vector<lowp16> a(16, to_bfloat16(1.0f)), b(16, to_bfloat16(std::ldexp(1.0f, -8)));
  a[1] = lowp16{0x7f7f};  // the largest finite, twice: Inf
  b[1] = lowp16{0x7f7f};
  a[2] = lowp16{0x7f80};  // Inf + -Inf: NaN
  b[2] = lowp16{0xff80};
  a[3] = lowp16{0x0001};  // the smallest subnormal, twice: exact
  b[3] = lowp16{0x0001};
  sum_into_bf16(a.data(), b.data(), b.size());
  EXPECT_EQ(b[0].bits, 0x3f80);
  EXPECT_EQ(b[1].bits, 0x7f80);
  EXPECT_TRUE(std::isnan(bfloat16_to_float(b[2])));
  EXPECT_EQ(b[3].bits, 0x0002);
  EXPECT_EQ(b[15].bits, 0x3f80);
}

}  // namespace
}  // namespace ddp
