// test_unscale.cpp: the unscale ops with their Inf/NaN flag (kernels/ops/
// unscale.h), FP16 and BF16: the CPU rows against the double product of
// the (widened) gradient and 1/S, rounded once to FP32 (half an FP32 ulp),
// and their flag against where that product is not finite in FP32; the
// CUDA rows against the CPU rows, bitwise (op_test_support.h). Tolerances
// as tests/cuda/cuda_test_optimizer.cpp: the unscales are one exact
// widening and one FP32 multiply on both rows (bitwise).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/ops/op_test_support.h"
#include "kernels/ops/unscale.h"
#include "support/test_cuda_op_context.h"

namespace ddp::test {
namespace {

class Unscale : public OpTest {
 protected:
  CpuBackend cpu{2, precision()};
  TestCudaOpContext cuda{precision()};
};

constexpr float kInf = std::numeric_limits<float>::infinity();
// A double rounds to FP32's Inf from half an ulp past the largest float
// (2^128 - 2^104) up: 2^128 - 2^103 (the tie goes to the even Inf).
constexpr double kFp32OverflowsFrom = 0x1p128 - 0x1p103;

std::vector<float> nan_floats(size_t count) { return std::vector<float>(count, NAN); }

// The CPU row against double: a widened 16-bit value (at most 11
// significant bits) or a float (24) times the float 1/S (24) has at most
// 48 significant bits, so the double product is exact, and the FP32 result
// must be that product rounded once: within half an FP32 ulp of it (the
// ulp of its binade, of the subnormals' 2^-149 below the normals), a zero
// of its sign, +-Inf from kFp32OverflowsFrom up, NaN where it is NaN.
// Returns whether any product is not finite in FP32: where the flag must
// be set.
bool expect_rounded_products(const std::vector<double>& x, float inv_scale, const std::vector<float>& got,
                             const std::string& what) {
  if (got.size() != x.size()) {
    ADD_FAILURE() << what << ": " << got.size() << " results for " << x.size() << " gradients";
    return false;
  }
  bool nonfinite = false;
  int reported = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double exact = x[i] * static_cast<double>(inv_scale);
    const bool overflows = std::isnan(exact) || std::fabs(exact) >= kFp32OverflowsFrom;  // Inf included
    nonfinite |= overflows;
    bool ok = false;
    if (std::isnan(exact)) {
      ok = std::isnan(got[i]);
    } else if (overflows) {
      ok = std::isinf(got[i]) && std::signbit(got[i]) == std::signbit(exact);
    } else if (exact == 0.0) {
      ok = got[i] == 0.0f && std::signbit(got[i]) == std::signbit(exact);
    } else {
      int exponent = 0;
      std::frexp(exact, &exponent);  // |exact| in [2^(exponent-1), 2^exponent)
      const double half_ulp = std::ldexp(1.0, std::max(exponent - 1, -126) - 24);
      ok = std::fabs(static_cast<double>(got[i]) - exact) <= half_ulp;  // false for Inf and NaN
    }
    if (!ok && reported++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << ", want " << exact << " rounded to FP32";
  }
  return nonfinite;
}

// 16-bit gradients to FP32 times 1/S, the flag set by any non-finite result
// (an Inf or NaN gradient, or the multiply's overflow) and never cleared;
// the check alone (no FP32 output) and no flag; the scale by value and read
// from the backend's memory. Counts of one and past a block, the bad
// element first, in the middle and last.
TEST_P(Unscale, LowpIsTheCpusAndFlagsNonFinite) {
  SCOPED_TRACE(seed_text());
  int runs = 0;
  auto run = [&](const std::vector<lowp16>& grads, float inv_scale, int32_t flag_before, const std::string& what) {
    const size_t n = grads.size();
    const bool scale_in_memory = runs++ % 2 == 1;
    const std::string w = what + (scale_in_memory ? ", scale read from memory" : "");
    // The CPU row on the host vectors, against double.
    std::vector<float> want = nan_floats(n);
    int32_t want_flag = flag_before;
    UnscaleLowpToFp32 op;
    op.grads_lowp = grads.data();
    op.grads_fp32 = want.data();
    op.count = n;
    op.inv_scale = scale_in_memory ? ScalarArg::at(&inv_scale) : ScalarArg(inv_scale);
    op.nonfinite_flag = &want_flag;
    unscale_lowp_to_fp32(cpu, op);
    const bool nonfinite = expect_rounded_products(fmt.widened_doubles(grads), inv_scale, want, w + ": CPU row");
    EXPECT_EQ(want_flag, nonfinite ? 1 : flag_before) << w << ": CPU row's flag";
    // The CUDA row on device copies.
    DeviceArray<lowp16> d_grads(grads);
    DeviceArray<float> d_scale(std::vector<float>{inv_scale});
    DeviceArray<float> d_fp32(nan_floats(n));
    DeviceArray<int32_t> d_flag(std::vector<int32_t>{flag_before});
    op.grads_lowp = d_grads.get();
    op.grads_fp32 = d_fp32.get();
    op.inv_scale = scale_in_memory ? ScalarArg::at(d_scale.get()) : ScalarArg(inv_scale);
    op.nonfinite_flag = d_flag.get();
    unscale_lowp_to_fp32_cuda(cuda, op);
    expect_same_float_bits(d_fp32.download(), want, w + ": grads_fp32");
    EXPECT_EQ(d_flag.download()[0], want_flag) << w << ": flag";
    // The check alone.
    d_flag.upload(std::vector<int32_t>{flag_before});
    op.grads_fp32 = nullptr;
    unscale_lowp_to_fp32_cuda(cuda, op);
    EXPECT_EQ(d_flag.download()[0], want_flag) << w << ": flag of the check alone";
    return want_flag;
  };
  const float inv_scale = 1.0f / 1024.0f;
  for (const size_t n : {size_t{1}, size_t{257}, size_t{3001}}) {
    const std::string count = "count " + std::to_string(n);
    const std::vector<lowp16> clean = fmt.random(rng, n, -1000.0f, 1000.0f);
    EXPECT_EQ(run(clean, inv_scale, 0, count + ", clean"), 0);
    EXPECT_EQ(run(clean, inv_scale, 1, count + ", clean, flag already set"), 1);
    // No flag: the FP32 output alone.
    std::vector<float> want = nan_floats(n);
    UnscaleLowpToFp32 op;
    op.grads_lowp = clean.data();
    op.grads_fp32 = want.data();
    op.count = n;
    op.inv_scale = inv_scale;
    unscale_lowp_to_fp32(cpu, op);
    DeviceArray<lowp16> d_clean(clean);
    DeviceArray<float> d_fp32(nan_floats(n));
    op.grads_lowp = d_clean.get();
    op.grads_fp32 = d_fp32.get();
    unscale_lowp_to_fp32_cuda(cuda, op);
    expect_same_float_bits(d_fp32.download(), want, count + ", no flag");
    for (const uint16_t bad : {fmt.inf_bits(), fmt.neg_inf_bits(), fmt.nan_bits()})
      for (const size_t at : {size_t{0}, n / 2, n - 1}) {
        if (n == 1 && at > 0) continue;
        std::vector<lowp16> grads = clean;
        grads[at].bits = bad;
        EXPECT_EQ(run(grads, inv_scale, 0, count + ", bits " + std::to_string(bad) + " at " + std::to_string(at)), 1);
      }
    // Finite gradients whose product overflows FP32 (the format's largest
    // value times 1e34).
    std::vector<lowp16> big = clean;
    big[n - 1].bits = fmt.max_bits();
    EXPECT_EQ(run(big, 1e34f, 0, count + ", overflow by the scale"), 1);
  }
}

// FP32 sums times 1/S, in place or not (the scale read from the device in
// place), the flag as above.
TEST_P(Unscale, Fp32IsTheCpusInPlaceAndFlagsNonFinite) {
  SCOPED_TRACE(seed_text());
  struct Bad {
    const char* name;
    float value, inv_scale;
  };
  for (const size_t n : {size_t{1}, size_t{257}, size_t{3001}})
    for (const Bad bad :
         {Bad{"clean", 0.0f, 1.0f / 3000.0f}, Bad{"+Inf", kInf, 1.0f / 3000.0f}, Bad{"-Inf", -kInf, 1.0f / 3000.0f},
          Bad{"NaN", NAN, 1.0f / 3000.0f}, Bad{"overflow", 3e38f, 10.0f}})
      for (const size_t at : {size_t{0}, n - 1}) {
        const bool clean = std::string(bad.name) == "clean";
        if (clean && at > 0) continue;
        const int32_t flag_before = clean && n > 1 ? 1 : 0;
        const std::string what = "count " + std::to_string(n) + ", " + bad.name + " at " + std::to_string(at) +
                                 ", flag before " + std::to_string(flag_before);
        std::vector<float> grads = random_floats(rng, n, -1e4f, 1e4f);
        if (!clean) grads[at] = bad.value;
        // The CPU row on the host vectors, against double.
        std::vector<float> want = nan_floats(n);
        int32_t want_flag = flag_before;
        UnscaleFp32 op;
        op.grads_in = grads.data();
        op.grads_out = want.data();
        op.count = n;
        op.inv_scale = bad.inv_scale;
        op.nonfinite_flag = &want_flag;
        unscale_fp32(cpu, op);
        const bool found = expect_rounded_products(std::vector<double>(grads.begin(), grads.end()), bad.inv_scale, want,
                                                   what + ": CPU row");
        EXPECT_EQ(found, !clean) << what;
        EXPECT_EQ(want_flag, found ? 1 : flag_before) << what << ": CPU row's flag";
        // The CUDA row on device copies.
        DeviceArray<float> d_in(grads), d_out(nan_floats(n));
        DeviceArray<int32_t> d_flag(std::vector<int32_t>{flag_before});
        op.grads_in = d_in.get();
        op.grads_out = d_out.get();
        op.nonfinite_flag = d_flag.get();
        unscale_fp32_cuda(cuda, op);
        expect_same_float_bits(d_out.download(), want, what);
        EXPECT_EQ(d_flag.download()[0], want_flag) << what;
        DeviceArray<float> d_scale(std::vector<float>{bad.inv_scale});
        d_flag.upload(std::vector<int32_t>{flag_before});
        op.grads_out = d_in.get();
        op.inv_scale = ScalarArg::at(d_scale.get());
        unscale_fp32_cuda(cuda, op);
        expect_same_float_bits(d_in.download(), want, what + ", in place");
        EXPECT_EQ(d_flag.download()[0], want_flag) << what << ", in place";
      }
}

// An empty --zero range unscales with null buffers and the CUDA rows
// launch nothing.
TEST_P(Unscale, EmptyRangesLaunchNothing) {
  EXPECT_NO_THROW(unscale_lowp_to_fp32_cuda(cuda, UnscaleLowpToFp32{}));  // count 0, every pointer null
  EXPECT_NO_THROW(unscale_fp32_cuda(cuda, UnscaleFp32{}));
}

INSTANTIATE_TEST_SUITE_P(Precisions, Unscale, ::testing::ValuesIn(kBothPrecisions), precision_test_name);

}  // namespace
}  // namespace ddp::test
