// test_fused_optimizer.cpp: the optimizer's fused step on the CPU backend:
// the check-only unscale pass and SGD reading FP16 gradients give exactly the
// bits of the two-pass step (unscale to FP32, then SGD), flag Inf/NaN, and
// change nothing when the step is skipped.
#include <gtest/gtest.h>

#include "kernels/buffer.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/ops/sgd.h"
#include "kernels/ops/unscale.h"
#include "support/test_support.h"

namespace ddp {
namespace {

TEST(FusedOptimizer, Fp16GradSgdMatchesUnscaleThenSgdBitwise) {
  std::mt19937_64 rng(test::test_seed());
  SCOPED_TRACE("seed " + std::to_string(test::test_seed()));
  CpuBackend cpu(1);
  const size_t n = 70001;  // not a multiple of any block size
  const float inv_scale = 1.0f / 65536.0f;
  const auto grads_host = test::random_halves(rng, n, -60000.0f, 60000.0f);
  const auto master_host = test::random_floats(rng, n), momentum_host = test::random_floats(rng, n);
  for (bool momentum : {false, true}) {
    SgdParams p;
    p.lr = 0.05f;
    p.weight_decay = 1e-4f;
    p.grad_multiplier = 0.5f;
    if (momentum) {
      p.momentum = 0.9f;
      p.nesterov = true;
      p.first_step = false;
    }
    std::vector<float> grads_fp32(n), m_two = master_host, m_fused = master_host, mom_two = momentum_host,
                                      mom_fused = momentum_host;
    std::vector<lowp16> w_two = test::poison_halves(n), w_fused = test::poison_halves(n);
    int32_t flag = 0;
    UnscaleLowpToFp32 unscale;
    unscale.grads_lowp = grads_host.data();
    unscale.grads_fp32 = grads_fp32.data();
    unscale.count = n;
    unscale.inv_scale = inv_scale;
    unscale.nonfinite_flag = &flag;
    unscale_lowp_to_fp32(cpu, unscale);
    SgdUpdate sgd;
    sgd.params = p;
    sgd.grads = SgdGrads::unscaled(grads_fp32.data());
    sgd.master_fp32 = m_two.data();
    sgd.momentum_fp32 = momentum ? mom_two.data() : nullptr;
    sgd.weights_lowp = w_two.data();
    sgd.count = n;
    sgd.skip_flag = &flag;
    sgd_update(cpu, sgd);
    unscale.grads_fp32 = nullptr;
    unscale_lowp_to_fp32(cpu, unscale);
    sgd.grads = SgdGrads::scaled(grads_host.data(), inv_scale);
    sgd.master_fp32 = m_fused.data();
    sgd.momentum_fp32 = momentum ? mom_fused.data() : nullptr;
    sgd.weights_lowp = w_fused.data();
    sgd_update(cpu, sgd);
    EXPECT_EQ(flag, 0);
    EXPECT_EQ(m_fused, m_two) << "momentum " << momentum;
    EXPECT_EQ(mom_fused, mom_two);
    size_t differ = 0;
    for (size_t i = 0; i < n; ++i) differ += w_fused[i].bits != w_two[i].bits;
    EXPECT_EQ(differ, 0u);
    EXPECT_NE(m_fused, master_host);  // the step did move the weights
  }
}

TEST(FusedOptimizer, CheckOnlyPassFlagsInfAndNanAndSkipChangesNothing) {
  std::mt19937_64 rng(test::test_seed());
  CpuBackend cpu(1);
  const size_t n = 5000;
  for (uint16_t bad_bits : {uint16_t{0x7c00}, uint16_t{0xfc00}, uint16_t{0x7e00}}) {
    auto grads = test::random_halves(rng, n);
    grads[rng() % n].bits = bad_bits;
    int32_t flag = 0;
    UnscaleLowpToFp32 unscale;
    unscale.grads_lowp = grads.data();
    unscale.grads_fp32 = nullptr;
    unscale.count = n;
    unscale.inv_scale = 0.5f;
    unscale.nonfinite_flag = &flag;
    unscale_lowp_to_fp32(cpu, unscale);
    EXPECT_EQ(flag, 1) << std::hex << bad_bits;
    const auto master_host = test::random_floats(rng, n);
    auto master = master_host;
    std::vector<lowp16> weights = test::poison_halves(n);
    SgdParams p;
    p.lr = 0.1f;
    SgdUpdate sgd;
    sgd.params = p;
    sgd.grads = SgdGrads::scaled(grads.data(), 0.5f);
    sgd.master_fp32 = master.data();
    sgd.momentum_fp32 = nullptr;
    sgd.weights_lowp = weights.data();
    sgd.count = n;
    sgd.skip_flag = &flag;
    sgd_update(cpu, sgd);
    EXPECT_EQ(master, master_host);
    EXPECT_EQ(weights[0].bits, test::kPoisonHalfBits);  // not even the FP16 copy is written
  }
}

}  // namespace
}  // namespace ddp
