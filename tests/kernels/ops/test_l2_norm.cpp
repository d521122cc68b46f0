// test_l2_norm.cpp: the L2 norm of an FP32 vector (kernels/ops/l2_norm.h),
// FP16 and BF16 instantiations (the input is FP32 in both): the CPU row
// against a double sum of squares, and the CUDA row, cuda_common.cuh's
// two-pass sum (launch_sum: partial_sums_kernel, finish_sum_kernel),
// against the CPU row (op_test_support.h). Tolerances as tests/cuda/
// cuda_test_optimizer.cpp: both rows sum in double (kFp32RelTol).
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/ops/l2_norm.h"
#include "kernels/ops/op_test_support.h"
#include "support/test_cuda_op_context.h"

namespace ddp::test {
namespace {

class L2Norm : public OpTest {
 protected:
  CpuBackend cpu{2, precision()};
  TestCudaOpContext cuda{precision()};
};

constexpr float kInf = std::numeric_limits<float>::infinity();

// The CPU row against the double reference below. Each square of a float
// is exact in double (48 significant bits); a double sum of n non-negative
// terms is within (n - 1) * 2^-53 of the exact sum, relative (about 3e-11
// at the largest count here), on either side, halved by the square root;
// the CPU row then rounds once to FP32, within 2^-24 relative. So the two
// differ by less than 2^-24 + 1e-10 relative: we allow 2^-23, one FP32 ulp
// relative. An average term lost or counted twice moves the norm by about
// 1/(2n) relative, and a sum in FP32 by some 2e-5: at the largest count
// (2e-6 for the lost term) both fail it.
constexpr double kL2NormRelTol = 0x1p-23;

std::vector<float> nan_floats(size_t count) { return std::vector<float>(count, NAN); }

// sqrt(sum x^2) in double, not rounded to FP32.
double double_l2_norm(const std::vector<float>& x) {
  double sum_of_squares = 0.0;
  for (const float v : x) sum_of_squares += static_cast<double>(v) * static_cast<double>(v);
  return std::sqrt(sum_of_squares);
}

// |got - want| <= rel * want; Inf and NaN where the reference has them.
void expect_near_norm(float got, double want, double rel, const std::string& what) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << what << ": got " << got << ", want NaN";
  } else if (std::isinf(want)) {
    EXPECT_EQ(static_cast<double>(got), want) << what;
  } else {
    EXPECT_LE(std::fabs(static_cast<double>(got) - want), rel * want)
        << what << ": got " << got << ", want " << want << " (rel " << rel << ")";
  }
}

// Nothing (0), one, both sides of a block of 256, many blocks; and once
// (the FP16 instantiation: the input is FP32, so BF16 would repeat it)
// past the first pass's 1024 blocks, where every thread sums more than one
// element. Both rows sum squares in double: kFp32RelTol. An Inf or NaN
// anywhere gives the CPU row's Inf or NaN.
TEST_P(L2Norm, MatchesTheCpu) {
  SCOPED_TRACE(seed_text());
  std::vector<size_t> counts = {0, 1, 255, 257, 4099};
  if (precision() == Precision::Fp16) counts.push_back(size_t{1024} * 256 + 999);
  auto run = [&](const std::vector<float>& x, double rel, const std::string& what) {
    // The CPU row on the host vector, against double.
    float want = NAN;
    L2NormFp32 op;
    op.x = x.data();
    op.count = x.size();
    op.norm = &want;
    l2_norm_fp32(cpu, op);
    expect_near_norm(want, double_l2_norm(x), kL2NormRelTol, what + ": CPU row");
    // The CUDA row on device copies (count 0: a one-element buffer, not read).
    DeviceArray<float> d_x(x.empty() ? nan_floats(1) : x);
    DeviceArray<float> d_norm(nan_floats(1));
    op.x = d_x.get();
    op.norm = d_norm.get();
    l2_norm_fp32_cuda(cuda, op);
    expect_close(d_norm.download(), {want}, rel, 0.0, what);
  };
  for (const size_t n : counts) run(random_floats(rng, n, -3.0f, 3.0f), kFp32RelTol, "norm of " + std::to_string(n));
  const size_t n = 4099;
  for (const float bad : {kInf, -kInf, NAN}) {
    std::vector<float> x = random_floats(rng, n);
    const size_t at = std::uniform_int_distribution<size_t>(0, n - 1)(rng);
    x[at] = bad;
    run(x, 0.0, "norm with " + std::to_string(bad) + " at " + std::to_string(at));
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, L2Norm, ::testing::ValuesIn(kBothPrecisions), precision_test_name);

}  // namespace
}  // namespace ddp::test
