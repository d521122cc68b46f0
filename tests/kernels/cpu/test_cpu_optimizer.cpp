// test_cpu_optimizer.cpp: CpuBackend's optimizer kernels (unscale with the
// non-finite flag, L2 norm, SGD as torch.optim.SGD defines it, a skipped
// step) against a double reference, and split over threads bitwise equal to
// one thread and to the scalar element loop; the buffer checks both
// backends make (optimizer_preconditions.h): an empty range with null
// buffers passes, a missing buffer of a non-empty one throws. Tolerances:
// cpu_kernel_support.h.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "cpu_kernel_support.h"
#include "kernels/buffer.h"
#include "kernels/error.h"
#include "kernels/ops/adamw.h"
#include "kernels/ops/l2_norm.h"
#include "kernels/ops/sgd.h"
#include "kernels/ops/unscale.h"

namespace ddp {
namespace {

using namespace test;  // cpu_kernel_support.h: CpuKernels, inputs, tolerances

TEST_P(CpuLowpKernels, UnscaleFindsOneNonFiniteAnywhere) {
  const size_t n = 1 << 20;
  const float inv_scale = 1.0f / 4096.0f;
  auto g = fmt.random(rng, n, -100.0f, 100.0f);
  Buffer<lowp16> dg(cpu, n);
  Buffer<float> out(cpu, n);
  Buffer<int32_t> flag(cpu, 1);
  dg.upload(g);
  flag.zero();
  UnscaleLowpToFp32 unscale;
  unscale.grads_lowp = dg.data();
  unscale.grads_fp32 = out.data();
  unscale.count = n;
  unscale.inv_scale = inv_scale;
  unscale.nonfinite_flag = flag.data();
  unscale_lowp_to_fp32(cpu, unscale);
  EXPECT_EQ(flag.download()[0], 0);
  const auto o = out.download();
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(o[i], fmt.widen(g[i]) * inv_scale);
  for (uint16_t bad : {fmt.inf_bits(), fmt.neg_inf_bits(), fmt.nan_bits()}) {  // +Inf, -Inf, NaN
    const size_t pos = std::uniform_int_distribution<size_t>(0, n - 1)(rng);
    auto poisoned = g;
    poisoned[pos].bits = bad;
    dg.upload(poisoned);
    flag.zero();
    unscale_lowp_to_fp32(cpu, unscale);
    EXPECT_EQ(flag.download()[0], 1) << "bits " << bad << " at " << pos;
  }
}

// The FP32 sums' unscale (--grad-reduce-dtype fp32): one FP32 multiply per
// element, in place or not, split over threads; of widened 16-bit values
// it gives unscale_lowp_to_fp32's bits; an Inf or NaN anywhere (its own, or
// one the multiply makes: an overflow) sets the flag, a clean pass never
// clears it.
TEST_P(CpuLowpKernelsThreaded, UnscaleFp32IsOneMultiplyAndFlagsNonFiniteAnywhere) {
  const size_t n = kLarge;
  const float inv_scale = 1.0f / 3000.0f;
  const auto g = test::random_floats(rng, n, -1e4f, 1e4f);
  for (CpuBackend* be : {&one, &two}) {
    Buffer<float> in(*be, n), out(*be, n);
    Buffer<int32_t> flag(*be, 1);
    in.upload(g);
    out.upload(std::vector<float>(n, std::nanf("")));
    flag.zero();
    UnscaleFp32 unscale;
    unscale.grads_in = in.data();
    unscale.grads_out = out.data();
    unscale.count = n;
    unscale.inv_scale = inv_scale;
    unscale.nonfinite_flag = flag.data();
    unscale_fp32(*be, unscale);
    EXPECT_EQ(flag.download()[0], 0);
    const auto o = out.download();
    size_t wrong = 0;
    for (size_t i = 0; i < n; ++i) wrong += test::bits_of(o[i]) != test::bits_of(g[i] * inv_scale);
    EXPECT_EQ(wrong, 0u) << "out of place";
    unscale.grads_out = in.data();
    unscale_fp32(*be, unscale);
    EXPECT_EQ(in.download(), o) << "in place";
    flag.upload(std::vector<int32_t>{1});
    unscale.grads_in = out.data();
    unscale.grads_out = out.data();
    unscale.inv_scale = 1.0f;
    unscale_fp32(*be, unscale);
    EXPECT_EQ(flag.download()[0], 1) << "a clean pass cleared the flag";
    const float inf = std::numeric_limits<float>::infinity();
    for (const float bad : {inf, -inf, std::nanf(""), 3e38f}) {  // the last: finite, Inf once multiplied by 10
      for (const size_t pos : {size_t{0}, std::uniform_int_distribution<size_t>(1, n - 2)(rng), n - 1}) {
        auto poisoned = g;
        poisoned[pos] = bad;
        in.upload(poisoned);
        flag.zero();
        unscale.grads_in = in.data();
        unscale.grads_out = out.data();
        unscale.inv_scale = bad == 3e38f ? 10.0f : inv_scale;
        unscale_fp32(*be, unscale);
        EXPECT_EQ(flag.download()[0], 1) << bad << " at " << pos;
      }
    }
  }
  // Of widened 16-bit values, unscale_lowp_to_fp32's bits.
  const auto h = fmt.random(rng, n, -100.0f, 100.0f);
  Buffer<lowp16> dh(one, n);
  Buffer<float> widened(one, n), direct(one, n);
  dh.upload(h);
  UnscaleLowpToFp32 widen;
  widen.grads_lowp = dh.data();
  widen.grads_fp32 = widened.data();
  widen.count = n;
  widen.inv_scale = 1.0f;
  widen.nonfinite_flag = nullptr;
  unscale_lowp_to_fp32(one, widen);
  UnscaleFp32 unscale;
  unscale.grads_in = widened.data();
  unscale.grads_out = widened.data();
  unscale.count = n;
  unscale.inv_scale = inv_scale;
  unscale.nonfinite_flag = nullptr;
  unscale_fp32(one, unscale);
  UnscaleLowpToFp32 unscale_direct;
  unscale_direct.grads_lowp = dh.data();
  unscale_direct.grads_fp32 = direct.data();
  unscale_direct.count = n;
  unscale_direct.inv_scale = inv_scale;
  unscale_direct.nonfinite_flag = nullptr;
  unscale_lowp_to_fp32(one, unscale_direct);
  EXPECT_EQ(widened.download(), direct.download());
}

TEST_P(CpuLowpKernels, L2Norm) {
  const size_t n = 300007;
  const auto x = test::random_floats(rng, n, -3.0f, 3.0f);
  Buffer<float> dx(cpu, n), norm(cpu, 1);
  dx.upload(x);
  L2NormFp32 l2;
  l2.x = dx.data();
  l2.count = n;
  l2.norm = norm.data();
  l2_norm_fp32(cpu, l2);
  double s = 0;
  for (float v : x) s += static_cast<double>(v) * v;
  EXPECT_TRUE(close_enough(norm.download()[0], std::sqrt(s), test::kFp32RelTol, 0));
}

// PyTorch torch.optim.SGD, written out in double.
void sgd_reference(const SgdParams& s, double grad, double& p, double& buf) {
  double g = grad * s.grad_multiplier + s.weight_decay * p;
  if (s.momentum != 0) {
    buf = s.first_step ? g : s.momentum * buf + (1 - s.dampening) * g;
    g = s.nesterov ? g + s.momentum * buf : buf;
  }
  p -= s.lr * g;
}

TEST_P(CpuLowpKernels, SgdMatchesTorchSemantics) {
  const size_t n = 5003;
  for (int variant = 0; variant < 4; ++variant) {
    SgdParams s;
    s.lr = 0.05f;
    s.momentum = variant == 0 ? 0.0f : 0.9f;
    s.nesterov = variant == 2;
    s.weight_decay = variant == 3 ? 1e-3f : 0.0f;
    s.grad_multiplier = variant == 3 ? 0.5f : 1.0f;
    const auto grads = test::random_floats(rng, n), p0 = test::random_floats(rng, n), m0 = test::random_floats(rng, n);
    Buffer<float> dg(cpu, n), dp(cpu, n), dm(cpu, n);
    Buffer<lowp16> dw(cpu, n);
    Buffer<int32_t> flag(cpu, 1);
    dg.upload(grads);
    dp.upload(p0);
    dm.upload(m0);
    flag.zero();
    dw.upload(fmt.poison(n));
    for (bool first : {true, false}) {
      s.first_step = first;
      std::vector<double> p(p0.begin(), p0.end()), m(m0.begin(), m0.end());
      dp.upload(p0);
      dm.upload(m0);
      SgdUpdate sgd;
      sgd.params = s;
      sgd.grads = SgdGrads::unscaled(dg.data());
      sgd.master_fp32 = dp.data();
      sgd.momentum_fp32 = dm.data();
      sgd.weights_lowp = dw.data();
      sgd.count = n;
      sgd.skip_flag = flag.data();
      sgd_update(cpu, sgd);
      const auto gp = dp.download(), gm = dm.download();
      const auto gw = dw.download();
      for (size_t i = 0; i < n; ++i) {
        sgd_reference(s, grads[i], p[i], m[i]);
        ASSERT_TRUE(close_enough(gp[i], p[i], test::kFp32RelTol, 1e-6)) << "variant " << variant << " i " << i;
        if (s.momentum != 0) {
          ASSERT_TRUE(close_enough(gm[i], m[i], test::kFp32RelTol, 1e-6));
        }
        ASSERT_EQ(gw[i].bits, fmt.narrow(gp[i]).bits);  // re-cast from the master
      }
    }
  }
}

TEST_P(CpuLowpKernels, SgdSkippedWhenFlagSetChangesNothing) {
  const size_t n = 777;
  const auto grads = test::random_floats(rng, n), p0 = test::random_floats(rng, n), m0 = test::random_floats(rng, n);
  const auto w0 = fmt.random(rng, n);
  Buffer<float> dg(cpu, n), dp(cpu, n), dm(cpu, n);
  Buffer<lowp16> dw(cpu, n);
  Buffer<int32_t> flag(cpu, 1);
  dg.upload(grads);
  dp.upload(p0);
  dm.upload(m0);
  dw.upload(w0);
  flag.upload(std::vector<int32_t>{1});
  SgdParams s;
  s.lr = 0.1f;
  s.momentum = 0.9f;
  s.first_step = false;
  s.weight_decay = 0.01f;
  SgdUpdate sgd;
  sgd.params = s;
  sgd.grads = SgdGrads::unscaled(dg.data());
  sgd.master_fp32 = dp.data();
  sgd.momentum_fp32 = dm.data();
  sgd.weights_lowp = dw.data();
  sgd.count = n;
  sgd.skip_flag = flag.data();
  sgd_update(cpu, sgd);
  EXPECT_EQ(dp.download(), p0);
  EXPECT_EQ(dm.download(), m0);
  const auto w = dw.download();
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(w[i].bits, w0[i].bits);
}

// ---- split over threads ------------------------------------------------------------

TEST_P(CpuLowpKernelsThreaded, UnscaleSplitFindsNonFiniteAndChecksWithoutOutput) {
  const size_t n = kLarge;
  const float inv_scale = 1.0f / 4096.0f;
  auto g = fmt.random(rng, n, -100.0f, 100.0f);
  Buffer<lowp16> dg(two, n);
  Buffer<float> out(two, n);
  Buffer<int32_t> flag(two, 1);
  dg.upload(g);
  UnscaleLowpToFp32 unscale;
  unscale.grads_lowp = dg.data();
  unscale.count = n;
  unscale.inv_scale = inv_scale;
  unscale.nonfinite_flag = flag.data();
  for (float* dst : {out.data(), static_cast<float*>(nullptr)}) {
    flag.zero();
    unscale.grads_fp32 = dst;
    unscale_lowp_to_fp32(two, unscale);
    EXPECT_EQ(flag.download()[0], 0);
  }
  const auto o = out.download();
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(o[i], fmt.widen(g[i]) * inv_scale);
  // Each thread's range, its vector body and its tail; Inf, NaN, and a finite
  // FP16 that overflows once multiplied.
  for (size_t pos : {size_t{0}, n / 2 - 1, n / 2 + 70, n - 1}) {
    for (uint16_t bad : {fmt.inf_bits(), fmt.nan_bits(), fmt.max_bits()}) {
      auto poisoned = g;
      poisoned[pos].bits = bad;
      dg.upload(poisoned);
      const float scale = bad == fmt.max_bits() ? 1e35f : inv_scale;
      unscale.inv_scale = scale;
      for (float* dst : {out.data(), static_cast<float*>(nullptr)}) {
        flag.zero();
        unscale.grads_fp32 = dst;
        unscale_lowp_to_fp32(two, unscale);
        EXPECT_EQ(flag.download()[0], 1) << "bits " << bad << " at " << pos << (dst ? "" : " (check only)");
      }
    }
  }
}

// sgd_update must stay bitwise equal to sgd_update_element applied element by
// element, whatever the thread count, F16C or not, and the fused FP16-gradient
// step bitwise equal to unscale followed by sgd_update.
TEST_P(CpuLowpKernelsThreaded, SgdBitwiseEqualsScalarElementLoop) {
  const size_t n = kLarge;
  const float inv_scale = 1.0f / 1024.0f;
  const auto grads16 = fmt.random(rng, n, -50.0f, 50.0f);
  const auto p0 = test::random_floats(rng, n), m0 = test::random_floats(rng, n);
  std::vector<float> grads(n);
  for (size_t i = 0; i < n; ++i) grads[i] = fmt.widen(grads16[i]) * inv_scale;  // unscale_element in the format
  for (int variant = 0; variant < 5; ++variant) {
    SgdParams s;
    s.lr = 0.05f;
    s.momentum = variant == 0 ? 0.0f : 0.9f;
    s.nesterov = variant == 2;
    s.weight_decay = variant >= 3 ? 1e-3f : 0.0f;
    s.grad_multiplier = variant >= 3 ? 0.37f : 1.0f;
    s.dampening = variant == 4 ? 0.1f : 0.0f;
    for (bool first : {true, false}) {
      s.first_step = first;
      std::vector<float> p = p0, m = m0;
      for (size_t i = 0; i < n; ++i) sgd_update_element(s, grads[i], p[i], m[i]);
      for (CpuBackend* be : {&one, &two})
        for (bool f16c : {false, true})
          for (bool fused : {false, true}) {
            SCOPED_TRACE(testing::Message() << "variant " << variant << " first " << first << " threads "
                                            << be->threads() << " f16c " << f16c << " fused " << fused);
            set_f16c_enabled(f16c);
            Buffer<float> dg(*be, n), dp(*be, n), dm(*be, n);
            Buffer<lowp16> dg16(*be, n), dw(*be, n);
            dg.upload(grads);
            dg16.upload(grads16);
            dp.upload(p0);
            dm.upload(m0);
            dw.upload(fmt.poison(n));
            SgdUpdate sgd;
            sgd.params = s;
            sgd.grads = fused ? SgdGrads::scaled(dg16.data(), inv_scale) : SgdGrads::unscaled(dg.data());
            sgd.master_fp32 = dp.data();
            sgd.momentum_fp32 = dm.data();
            sgd.weights_lowp = dw.data();
            sgd.count = n;
            sgd.skip_flag = nullptr;
            sgd_update(*be, sgd);
            set_f16c_enabled(true);
            const auto gp = dp.download(), gm = dm.download();
            const auto gw = dw.download();
            for (size_t i = 0; i < n; ++i) {
              ASSERT_EQ(float_to_bits(gp[i]), float_to_bits(p[i])) << i;
              ASSERT_EQ(float_to_bits(gm[i]), float_to_bits(m[i])) << i;
              ASSERT_EQ(gw[i].bits, fmt.narrow(p[i]).bits) << i;
            }
          }
    }
  }
}

// A rank whose --zero range is empty steps a count of 0 with null state
// buffers (its ranges are empty, so Buffer holds no memory) every step, as
// its peers step theirs: the call is accepted and touches nothing, with and
// without momentum, on both gradient routes, and for AdamW. The CUDA
// launchers make the same checks (cuda_test_optimizer.cpp:
// EmptyRangeWithNullBuffersIsANoOp); before they looked at the count,
// `mpirun -np 3 ddp_train --device cuda --data synthetic --zero 1` threw
// on every step.
TEST_P(CpuLowpKernels, EmptyRangeWithNullBuffersIsANoOp) {
  int32_t no_skip = 0;
  for (float momentum : {0.0f, 0.9f}) {
    SgdParams s;
    s.lr = 0.1f;
    s.momentum = momentum;
    for (const int32_t* skip : {static_cast<const int32_t*>(nullptr), static_cast<const int32_t*>(&no_skip)}) {
      SgdUpdate sgd;
      sgd.params = s;
      sgd.grads = SgdGrads::unscaled(nullptr);
      sgd.master_fp32 = nullptr;
      sgd.momentum_fp32 = nullptr;
      sgd.weights_lowp = nullptr;
      sgd.count = 0;
      sgd.skip_flag = skip;
      EXPECT_NO_THROW(sgd_update(cpu, sgd)) << "momentum " << momentum;
      sgd.grads = SgdGrads::scaled(nullptr, 0.5f);
      EXPECT_NO_THROW(sgd_update(cpu, sgd)) << "momentum " << momentum << ", FP16 gradients";
    }
  }
  AdamWParams a;
  a.lr = 1e-3f;
  for (size_t offset : {size_t{0}, size_t{4096}}) {  // a range's offset into whole buffers; none here
    AdamWUpdate adamw;
    adamw.params = a;
    adamw.buffers = AdamWBuffers{};
    adamw.inv_scale = 0.5f;
    adamw.offset = offset;
    adamw.count = 0;
    adamw.skip_flag = &no_skip;
    EXPECT_NO_THROW(adamw_update(cpu, adamw)) << "offset " << offset;
  }
}

// Where there is something to update, a missing buffer the step needs is
// an error on both backends, not a silent change of the update (CUDA's
// check, which the CPU backend once skipped: it ran momentum SGD without a
// buffer as if the buffer were zero each step).
TEST_P(CpuLowpKernels, MissingBuffersOfANonEmptyRangeAreRefused) {
  const size_t n = 8;
  std::vector<float> master(n, 1.0f), grads(n, 0.5f), momentum_fp32(n, 0.0f);
  std::vector<lowp16> weights(n);
  SgdParams s;
  s.lr = 0.1f;
  s.momentum = 0.9f;
  SgdUpdate no_momentum;  // momentum without its buffer
  no_momentum.params = s;
  no_momentum.grads = SgdGrads::unscaled(grads.data());
  no_momentum.master_fp32 = master.data();
  no_momentum.momentum_fp32 = nullptr;
  no_momentum.weights_lowp = weights.data();
  no_momentum.count = n;
  no_momentum.skip_flag = nullptr;
  EXPECT_THROW(sgd_update(cpu, no_momentum), Error);
  SgdUpdate no_grads_sgd;
  no_grads_sgd.params = s;
  no_grads_sgd.grads = SgdGrads::unscaled(nullptr);
  no_grads_sgd.master_fp32 = master.data();
  no_grads_sgd.momentum_fp32 = momentum_fp32.data();
  no_grads_sgd.weights_lowp = weights.data();
  no_grads_sgd.count = n;
  no_grads_sgd.skip_flag = nullptr;
  EXPECT_THROW(sgd_update(cpu, no_grads_sgd), Error);
  s.momentum = 0.0f;  // no momentum, no buffer needed
  no_momentum.params = s;
  EXPECT_NO_THROW(sgd_update(cpu, no_momentum));
  AdamWParams a;
  a.lr = 1e-3f;
  AdamWBuffers no_grads;
  no_grads.master_fp32 = master.data();
  AdamWUpdate adamw;
  adamw.params = a;
  adamw.buffers = no_grads;
  adamw.inv_scale = 1.0f;
  adamw.offset = 0;
  adamw.count = n;
  adamw.skip_flag = nullptr;
  EXPECT_THROW(adamw_update(cpu, adamw), Error);
}

}  // namespace
}  // namespace ddp
