// test_elementwise.cpp: the 16-bit element-wise ops (kernels/ops/
// elementwise.h), FP16 and BF16: each CPU row against a double-precision
// reference that shares no code with the codecs (the nearest value of the
// format, ties to even, from frexp/nearbyint), and each CUDA row against
// the CPU row, bitwise (under the SIMT executor in CI, on a GPU in
// ddp_cuda_tests). Sizes: one element, around a block (256) and past the
// executor's three-block grid cap, so the grid-stride loops take several
// passes.
#include <cmath>
#include <string>
#include <vector>

#include "kernels/buffer.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/ops/elementwise.h"
#include "kernels/ops/op_test_support.h"
#include "support/test_cuda_op_context.h"

namespace ddp::test {
namespace {

// The value of `p`'s format nearest to x, ties to even; +-Inf past the
// largest finite value by half an ulp or more. x is a float (or a sum of
// two floats of the format, exact in double), so x / ulp is exact.
double nearest_in_format(double x, Precision p) {
  if (std::isnan(x) || std::isinf(x) || x == 0.0) return x;
  const int mantissa_bits = p == Precision::Bf16 ? 7 : 10;
  const int min_exponent = p == Precision::Bf16 ? -126 : -14;  // the smallest normal's
  const int max_exponent = p == Precision::Bf16 ? 127 : 15;
  int exponent = 0;
  std::frexp(std::fabs(x), &exponent);  // |x| in [2^(exponent-1), 2^exponent)
  const double ulp = std::ldexp(1.0, std::max(exponent - 1, min_exponent) - mantissa_bits);
  const double rounded = std::nearbyint(x / ulp) * ulp;  // the default mode: to nearest, ties to even
  const double largest = std::ldexp(2.0 - std::ldexp(1.0, -mantissa_bits), max_exponent);
  return std::fabs(rounded) > largest ? std::copysign(INFINITY, x) : rounded;
}

// The 16-bit words as doubles against the reference, exactly; NaN as a class.
void expect_nearest(const LowpFormat& fmt, const std::vector<lowp16>& got, const std::vector<double>& want,
                    const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < got.size() && reported < 5; ++i) {
    const double g = fmt.widen(got[i]);
    if (std::isnan(want[i]) ? std::isnan(g) : g == want[i]) continue;
    ADD_FAILURE() << what << "[" << i << "]: got " << g << ", want " << want[i];
    ++reported;
  }
}

class Elementwise : public OpTest {
 protected:
  CpuBackend cpu{2, precision()};
  TestCudaOpContext cuda{precision()};
};

const size_t kCounts[] = {1, 255, 257, 5000};

TEST_P(Elementwise, CastFp32ToLowpIsTheNearestValue) {
  SCOPED_TRACE(seed_text());
  for (const size_t count : kCounts) {
    SCOPED_TRACE("count " + std::to_string(count));
    std::vector<float> src = random_floats(rng, count, -70000.0f, 70000.0f);  // past FP16's range: Inf
    if (count > 4) {                                                          // a tie, a subnormal, a NaN
      src[1] = 1.0f + std::ldexp(1.0f, precision() == Precision::Bf16 ? -8 : -11);
      src[2] = std::ldexp(3.0f, precision() == Precision::Bf16 ? -130 : -23);
      src[3] = std::nanf("");
    }
    std::vector<double> want(count);
    for (size_t i = 0; i < count; ++i) want[i] = nearest_in_format(src[i], precision());

    Buffer<float> cpu_src(cpu, count);
    Buffer<lowp16> cpu_dst(cpu, count);
    cpu_src.upload(src);
    cpu_dst.upload(LowpFormat::poison(count));
    CastFp32ToLowp cast;
    cast.src = cpu_src.data();
    cast.dst = cpu_dst.data();
    cast.count = count;
    cast_fp32_to_lowp(cpu, cast);
    const std::vector<lowp16> cpu_out = cpu_dst.download();
    expect_nearest(fmt, cpu_out, want, "CPU row");

    DeviceArray<float> d_src(src);
    DeviceArray<lowp16> d_dst(LowpFormat::poison(count));
    cast.src = d_src.get();
    cast.dst = d_dst.get();
    cast_fp32_to_lowp_cuda(cuda, cast);
    expect_same_bits(fmt, d_dst.download(), cpu_out, "CUDA row");
  }
}

TEST_P(Elementwise, AddLowpIsOneRoundingOfTheSumInPlaceToo) {
  SCOPED_TRACE(seed_text());
  for (const size_t count : kCounts) {
    SCOPED_TRACE("count " + std::to_string(count));
    // Past FP16's range (Inf) and sums that cancel.
    const std::vector<lowp16> a = fmt.random(rng, count, -40000.0f, 40000.0f);
    const std::vector<lowp16> b = fmt.random(rng, count, -40000.0f, 40000.0f);
    std::vector<double> want(count);
    for (size_t i = 0; i < count; ++i)
      want[i] = nearest_in_format(static_cast<double>(fmt.widen(a[i])) + fmt.widen(b[i]), precision());

    Buffer<lowp16> cpu_a(cpu, count), cpu_b(cpu, count), cpu_y(cpu, count);
    cpu_a.upload(a);
    cpu_b.upload(b);
    cpu_y.upload(LowpFormat::poison(count));
    AddLowp add;
    add.a = cpu_a.data();
    add.b = cpu_b.data();
    add.y = cpu_y.data();
    add.count = count;
    add_lowp(cpu, add);
    const std::vector<lowp16> cpu_out = cpu_y.download();
    expect_nearest(fmt, cpu_out, want, "CPU row, y = a + b");
    add.y = cpu_a.data();
    add_lowp(cpu, add);
    expect_same_bits(fmt, cpu_a.download(), cpu_out, "CPU row, a += b");

    DeviceArray<lowp16> d_a(a), d_b(b), d_y(LowpFormat::poison(count));
    add.a = d_a.get();
    add.b = d_b.get();
    add.y = d_y.get();
    add_lowp_cuda(cuda, add);
    expect_same_bits(fmt, d_y.download(), cpu_out, "CUDA row, y = a + b");
    add.y = d_a.get();
    add_lowp_cuda(cuda, add);
    expect_same_bits(fmt, d_a.download(), cpu_out, "CUDA row, a += b");
    d_a.upload(a);
    add.y = d_b.get();
    add_lowp_cuda(cuda, add);
    expect_same_bits(fmt, d_b.download(), cpu_out, "CUDA row, b += a");
  }
}

TEST_P(Elementwise, AddFp32IntoLowpIsOneRoundingOfTheSum) {
  SCOPED_TRACE(seed_text());
  for (const size_t count : kCounts) {
    SCOPED_TRACE("count " + std::to_string(count));
    const std::vector<float> src = random_floats(rng, count, -4.0f, 4.0f);
    const std::vector<lowp16> y = fmt.random(rng, count, -4.0f, 4.0f);
    std::vector<double> want(count);
    // The FP32 sum of a 16-bit value and a float, then one rounding: the
    // reference rounds the FP32 sum (float + float), not the exact one.
    for (size_t i = 0; i < count; ++i) want[i] = nearest_in_format(fmt.widen(y[i]) + src[i], precision());

    Buffer<float> cpu_src(cpu, count);
    Buffer<lowp16> cpu_y(cpu, count);
    cpu_src.upload(src);
    cpu_y.upload(y);
    AddFp32IntoLowp add;
    add.src = cpu_src.data();
    add.y = cpu_y.data();
    add.count = count;
    add_fp32_into_lowp(cpu, add);
    const std::vector<lowp16> cpu_out = cpu_y.download();
    expect_nearest(fmt, cpu_out, want, "CPU row");

    DeviceArray<float> d_src(src);
    DeviceArray<lowp16> d_y(y);
    add.src = d_src.get();
    add.y = d_y.get();
    add_fp32_into_lowp_cuda(cuda, add);
    expect_same_bits(fmt, d_y.download(), cpu_out, "CUDA row");
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, Elementwise, ::testing::ValuesIn(kBothPrecisions), precision_test_name);

}  // namespace
}  // namespace ddp::test
