// test_mse.cpp: the MSE ops (kernels/ops/mse.h), FP16 and BF16: the CPU
// rows against double, the CUDA rows against the CPU rows: the mean through
// cuda_common.cuh's two-pass sum (FP64 partials by blocks against the CPU's
// FP32 sum in order: the FP32 summation-order tolerance), the gradient the
// same FP32 operations on both rows, so bitwise (op_test_support.h).
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/ops/mse.h"
#include "kernels/ops/op_test_support.h"
#include "support/test_cuda_op_context.h"

namespace ddp::test {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

class Mse : public OpTest {
 protected:
  CpuBackend cpu{1, precision()};
  TestCudaOpContext cuda{precision()};
};

// MSE's mean through launch_sum (partial_sums_kernel, finish_sum_kernel):
// no element (0), one, both sides of a block of 256, 79 blocks of partial
// sums; Inf and NaN in the prediction or the target. The CPU sums in float
// in order, the device in double by blocks: the FP32 order tolerance. (More
// than the first pass's 1024 blocks, where each thread sums several
// elements, takes 2 s here: test_l2_norm.cpp's L2 norm covers that
// loop once.)
TEST_P(Mse, MseForwardMatchesTheCpu) {
  SCOPED_TRACE(seed_text());
  auto run = [&](const std::vector<lowp16>& pred, const std::vector<float>& target, const std::string& what,
                 double rel) {
    const size_t n = pred.size();
    float want = NAN;
    MseForward op;
    op.rows = n ? 1 : 0;
    op.cols = static_cast<int>(n);
    op.pred = pred.data();
    op.target = target.data();
    op.loss_mean = &want;
    mse_forward(cpu, op);
    // The CPU row against double: the FP32 squares summed in FP32.
    double exact = 0.0;
    for (size_t i = 0; i < n; ++i) {
      const double d = static_cast<double>(fmt.widen(pred[i])) - target[i];
      exact += d * d;
    }
    exact = n ? exact / static_cast<double>(n) : 0.0;
    expect_close({want}, {static_cast<float>(exact)}, 2.0 * fp32_order_rel_tol(n), 0.0, what + ": CPU row");
    DeviceArray<lowp16> d_pred(n ? pred : std::vector<lowp16>(1));
    DeviceArray<float> d_target(n ? target : std::vector<float>(1));
    DeviceArray<float> d_loss(std::vector<float>{NAN});
    op.pred = d_pred.get();
    op.target = d_target.get();
    op.loss_mean = d_loss.get();
    mse_forward_cuda(cuda, op);
    expect_close(d_loss.download(), {want}, rel, 0.0, what);
  };
  for (const size_t n : {size_t{0}, size_t{1}, size_t{255}, size_t{257}, size_t{4099}, size_t{20001}}) {
    const std::vector<lowp16> pred = fmt.random(rng, n, -2.0f, 2.0f);
    const std::vector<float> target = random_floats(rng, n, -2.0f, 2.0f);
    run(pred, target, "mse of " + std::to_string(n), fp32_order_rel_tol(n));
  }
  const size_t n = 3001;
  struct Bad {
    const char* name;
    size_t at;
    float pred, target;
  };
  for (const Bad bad : {Bad{"+Inf prediction", 0, kInf, 0.5f}, Bad{"-Inf prediction", n - 1, -kInf, 0.5f},
                        Bad{"NaN prediction", 1500, NAN, 0.5f}, Bad{"NaN target", n - 1, 0.5f, NAN},
                        Bad{"Inf - Inf", 77, kInf, kInf}}) {
    std::vector<lowp16> pred = fmt.random(rng, n, -2.0f, 2.0f);
    std::vector<float> target = random_floats(rng, n, -2.0f, 2.0f);
    pred[bad.at] = fmt.narrow(bad.pred);
    target[bad.at] = bad.target;
    run(pred, target, std::string("mse with ") + bad.name, 0.0);
  }
}

// MSE's gradient: the same FP32 operations in the same order on both sides
// (coef = 2 * scale / count, coef * (pred - target), one rounding): bitwise.
TEST_P(Mse, MseBackwardIsTheCpusRounding) {
  SCOPED_TRACE(seed_text());
  for (const size_t n : {size_t{1}, size_t{257}, size_t{4099}}) {
    std::vector<lowp16> pred = fmt.random(rng, n, -2.0f, 2.0f);
    std::vector<float> target = random_floats(rng, n, -2.0f, 2.0f);
    if (n > 3) {
      pred[1] = fmt.narrow(kInf);
      target[2] = NAN;
      pred[n - 1].bits = fmt.max_bits();
      target[n - 1] = -fmt.widen(lowp16{fmt.max_bits()});  // 2 * max: past FP32's range in BF16
    }
    const float scale = 512.0f;
    std::vector<lowp16> want = LowpFormat::poison(n);
    MseBackward op;
    op.rows = 1;
    op.cols = static_cast<int>(n);
    op.pred = pred.data();
    op.target = target.data();
    op.loss_scale = scale;
    op.dpred = want.data();
    mse_backward(cpu, op);
    // The CPU row against double: one rounding of the FP32 coef * difference,
    // within half an ulp of the exact value (FP32's own rounding far below).
    for (size_t i = 0; i < n; ++i) {
      const double exact = 2.0 * scale / static_cast<double>(n) * (static_cast<double>(fmt.widen(pred[i])) - target[i]);
      if (!std::isfinite(exact) || std::fabs(exact) > 60000.0) continue;  // the overflow rows: the CUDA check below
      EXPECT_NEAR(fmt.widen(want[i]), exact, fmt.rel_tol() * std::fabs(exact) + 1e-7) << "CPU row, element " << i;
    }
    DeviceArray<lowp16> d_pred(pred);
    DeviceArray<float> d_target(target);
    DeviceArray<float> d_scale(std::vector<float>{scale});
    for (const bool scale_on_device : {false, true}) {
      DeviceArray<lowp16> d_grad(LowpFormat::poison(n));
      op.pred = d_pred.get();
      op.target = d_target.get();
      op.loss_scale = scale_on_device ? ScalarArg::at(d_scale.get()) : ScalarArg(scale);
      op.dpred = d_grad.get();
      mse_backward_cuda(cuda, op);
      expect_same_bits(fmt, d_grad.download(), want,
                       "mse backward of " + std::to_string(n) + (scale_on_device ? ", scale on the device" : ""));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, Mse, ::testing::ValuesIn(kBothPrecisions), precision_test_name);

}  // namespace
}  // namespace ddp::test
