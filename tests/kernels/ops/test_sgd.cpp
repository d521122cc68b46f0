// test_sgd.cpp: the SGD step (kernels/ops/sgd.h), FP16 and BF16: the CUDA
// row against the CPU row, from FP32 gradients and from 16-bit gradients
// unscaled on the fly (and those bitwise the two-pass step: the unscale,
// kernels/ops/unscale.h, then SGD), a step skipped by the device flag, an
// empty range and a missing buffer (op_test_support.h). Tolerances as
// tests/cuda/cuda_test_optimizer.cpp: the masters and momentum are held to
// kFp32RelTol plus 1e-6 (nvcc contracts a * b + c into an FMA, g++ here
// does not: about one FP32 ulp of the terms on a GPU, bitwise under the
// executor), the 16-bit re-cast to two ulps of the format.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/error.h"
#include "kernels/ops/op_test_support.h"
#include "kernels/ops/sgd.h"
#include "kernels/ops/unscale.h"
#include "support/test_cuda_op_context.h"

namespace ddp::test {
namespace {

class Sgd : public OpTest {
 protected:
  CpuBackend cpu{2, precision()};
  TestCudaOpContext cuda{precision()};
};

constexpr double kFp16SubnormalStep = 6e-8;  // 2^-24: the 16-bit re-casts' floor

std::vector<float> nan_floats(size_t count) { return std::vector<float>(count, NAN); }

struct SgdVariant {
  const char* name;
  SgdParams params;
  bool momentum_buffer;
};

std::vector<SgdVariant> sgd_variants() {
  std::vector<SgdVariant> variants;
  SgdParams p;
  p.lr = 0.1f;
  variants.push_back({"plain, no momentum buffer", p, false});
  p.weight_decay = 0.01f;
  p.grad_multiplier = 0.37f;
  variants.push_back({"weight decay + clip multiplier, no momentum buffer", p, false});
  p = SgdParams{};
  p.lr = 0.1f;
  p.momentum = 0.9f;
  p.first_step = true;
  variants.push_back({"momentum from the first step", p, true});
  p.first_step = false;
  variants.push_back({"momentum", p, true});
  p.nesterov = true;
  p.weight_decay = 1e-4f;
  variants.push_back({"nesterov + weight decay", p, true});
  p.nesterov = false;
  p.momentum = 0.5f;
  p.dampening = 0.1f;
  p.weight_decay = 0.01f;
  p.grad_multiplier = 0.37f;
  variants.push_back({"dampening + weight decay + clip multiplier", p, true});
  return variants;
}

// Two steps on the same state (the second with first_step cleared; the
// first with a clear skip flag, the second with none), every variant, from
// FP32 gradients; the 16-bit re-cast written, or not (null) by the CUDA row.
TEST_P(Sgd, MatchesTheCpu) {
  SCOPED_TRACE(seed_text());
  const size_t n = 3001;
  const std::vector<float> grads = random_floats(rng, n);
  const std::vector<float> master_start = random_floats(rng, n), momentum_start = random_floats(rng, n);
  DeviceArray<float> d_grads(grads);
  const int32_t no_skip = 0;
  DeviceArray<int32_t> d_no_skip(std::vector<int32_t>{no_skip});
  for (const SgdVariant& v : sgd_variants())
    for (const bool recast : {true, false}) {
      const std::string what = std::string(v.name) + (recast ? "" : ", no 16-bit re-cast");
      std::vector<float> master = master_start, momentum = momentum_start;
      std::vector<lowp16> weights(n);
      DeviceArray<float> d_master(master_start), d_momentum(momentum_start);
      DeviceArray<lowp16> d_weights(LowpFormat::poison(n));
      SgdUpdate op;
      op.params = v.params;
      op.count = n;
      for (int step = 0; step < 2; ++step) {
        // The CPU row on the host vectors.
        op.grads = SgdGrads::unscaled(grads.data());
        op.master_fp32 = master.data();
        op.momentum_fp32 = v.momentum_buffer ? momentum.data() : nullptr;
        op.weights_lowp = weights.data();
        op.skip_flag = step == 0 ? &no_skip : nullptr;
        sgd_update(cpu, op);
        // The CUDA row on device copies.
        op.grads = SgdGrads::unscaled(d_grads.get());
        op.master_fp32 = d_master.get();
        op.momentum_fp32 = v.momentum_buffer ? d_momentum.get() : nullptr;
        op.weights_lowp = recast ? d_weights.get() : nullptr;
        op.skip_flag = step == 0 ? d_no_skip.get() : nullptr;
        sgd_update_cuda(cuda, op);
        op.params.first_step = false;
      }
      expect_close(d_master.download(), master, kFp32RelTol, 1e-6, what + ": master_fp32");
      expect_close(d_momentum.download(), momentum, kFp32RelTol, 1e-6, what + ": momentum_fp32");
      if (recast)
        expect_close(fmt, d_weights.download(), weights, fmt.rel_tol(), kFp16SubnormalStep, what + ": weights");
      else
        expect_same_bits(fmt, d_weights.download(), LowpFormat::poison(n), what + ": weights untouched");
    }
}

// The step state's lr and momentum start read from the device
// (SgdParams::lr_ptr, momentum_initialized), from 16-bit gradients unscaled
// on the fly with the scale read from the device too: the CPU row's fused
// loop on the same values; and on the device, bitwise the two-pass step
// (unscale_lowp_to_fp32_cuda to FP32, then SGD from FP32 gradients).
TEST_P(Sgd, FromLowpGradsMatchesTheCpuAndTheTwoPassStep) {
  SCOPED_TRACE(seed_text());
  const size_t n = 3001;
  const float inv_scale = 1.0f / 4096.0f;
  const std::vector<lowp16> grads = fmt.random(rng, n, -60000.0f, 60000.0f);
  const std::vector<float> master_start = random_floats(rng, n), momentum_start = random_floats(rng, n);
  SgdParams host_params;
  host_params.momentum = 0.9f;
  host_params.weight_decay = 1e-4f;
  host_params.grad_multiplier = 0.75f;
  std::vector<float> master = master_start, momentum = momentum_start;
  std::vector<lowp16> weights(n);
  DeviceArray<lowp16> d_grads(grads);
  DeviceArray<float> d_scale(std::vector<float>{inv_scale}), d_lr(std::vector<float>{0.0f});
  DeviceArray<int32_t> d_initialized(std::vector<int32_t>{0});
  DeviceArray<float> d_master(master_start), d_momentum(momentum_start), d_fp32(nan_floats(n));
  DeviceArray<float> d_master_two(master_start), d_momentum_two(momentum_start);
  DeviceArray<lowp16> d_weights(LowpFormat::poison(n)), d_weights_two(LowpFormat::poison(n));
  SgdParams device_params = host_params;
  device_params.lr = NAN;  // must come from lr_ptr
  device_params.lr_ptr = d_lr.get();
  device_params.momentum_initialized = d_initialized.get();
  SgdUpdate op;
  op.count = n;
  UnscaleLowpToFp32 unscale;
  unscale.grads_lowp = d_grads.get();
  unscale.grads_fp32 = d_fp32.get();
  unscale.count = n;
  unscale.inv_scale = inv_scale;
  for (int step = 0; step < 3; ++step) {
    const float lr = 0.01f * static_cast<float>(step + 1);
    host_params.lr = lr;
    host_params.first_step = step == 0;
    d_lr.upload(std::vector<float>{lr});
    d_initialized.upload(std::vector<int32_t>{step == 0 ? 0 : 1});
    // The CPU row on the host vectors.
    op.params = host_params;
    op.grads = SgdGrads::scaled(grads.data(), inv_scale);
    op.master_fp32 = master.data();
    op.momentum_fp32 = momentum.data();
    op.weights_lowp = weights.data();
    sgd_update(cpu, op);
    // The CUDA row, fused.
    op.params = device_params;
    op.grads = SgdGrads::scaled(d_grads.get(), ScalarArg::at(d_scale.get()));
    op.master_fp32 = d_master.get();
    op.momentum_fp32 = d_momentum.get();
    op.weights_lowp = d_weights.get();
    sgd_update_cuda(cuda, op);
    // The CUDA rows, two passes.
    unscale_lowp_to_fp32_cuda(cuda, unscale);
    op.grads = SgdGrads::unscaled(d_fp32.get());
    op.master_fp32 = d_master_two.get();
    op.momentum_fp32 = d_momentum_two.get();
    op.weights_lowp = d_weights_two.get();
    sgd_update_cuda(cuda, op);
  }
  expect_close(d_master.download(), master, kFp32RelTol, 1e-6, "master_fp32");
  expect_close(d_momentum.download(), momentum, kFp32RelTol, 1e-6, "momentum_fp32");
  expect_close(fmt, d_weights.download(), weights, fmt.rel_tol(), kFp16SubnormalStep, "weights");
  expect_same_float_bits(d_master.download(), d_master_two.download(), "fused against two-pass: master_fp32");
  expect_same_float_bits(d_momentum.download(), d_momentum_two.download(), "fused against two-pass: momentum_fp32");
  expect_same_bits(fmt, d_weights.download(), d_weights_two.download(), "fused against two-pass: weights");
}

// A set skip flag (the overflow the unscale found) leaves every buffer as it
// was, bit for bit, on the CUDA row from either kind of gradient (AdamW's:
// test_adamw.cpp).
TEST_P(Sgd, UpdatesSkippedWhenTheFlagIsSetChangeNothing) {
  SCOPED_TRACE(seed_text());
  const size_t n = 3001;
  const std::vector<float> master = random_floats(rng, n), momentum = random_floats(rng, n);
  const std::vector<lowp16> weights = fmt.random(rng, n), grads16 = fmt.random(rng, n);
  DeviceArray<float> d_grads(random_floats(rng, n)), d_master(master), d_momentum(momentum);
  DeviceArray<lowp16> d_weights(weights), d_grads16(grads16);
  DeviceArray<int32_t> d_skip(std::vector<int32_t>{1});
  SgdUpdate op;
  op.params.lr = 0.1f;
  op.params.momentum = 0.9f;
  op.params.first_step = false;
  op.params.weight_decay = 0.01f;
  op.params.nesterov = true;
  op.grads = SgdGrads::unscaled(d_grads.get());
  op.master_fp32 = d_master.get();
  op.momentum_fp32 = d_momentum.get();
  op.weights_lowp = d_weights.get();
  op.count = n;
  op.skip_flag = d_skip.get();
  sgd_update_cuda(cuda, op);
  op.grads = SgdGrads::scaled(d_grads16.get(), 0.5f);
  sgd_update_cuda(cuda, op);
  expect_same_float_bits(d_master.download(), master, "master_fp32");
  expect_same_float_bits(d_momentum.download(), momentum, "momentum");
  expect_same_bits(fmt, d_weights.download(), weights, "weights");
}

// An empty --zero range steps with null buffers and the CUDA row launches
// nothing; a non-empty one without a buffer it needs is refused
// (ddp::Error), as the CPU row refuses it (optimizer_preconditions.h).
TEST_P(Sgd, EmptyRangesLaunchNothingAndMissingBuffersAreRefused) {
  for (const float momentum : {0.0f, 0.9f}) {
    SgdUpdate s;  // count 0, every pointer null
    s.params.lr = 0.1f;
    s.params.momentum = momentum;
    s.grads = SgdGrads::unscaled(nullptr);
    EXPECT_NO_THROW(sgd_update_cuda(cuda, s));
    s.grads = SgdGrads::scaled(nullptr, 0.5f);
    EXPECT_NO_THROW(sgd_update_cuda(cuda, s));
  }
  const size_t n = 64;
  DeviceArray<float> d_master(std::vector<float>(n, 1.0f)), d_grads(std::vector<float>(n, 1.0f));
  SgdUpdate s;
  s.params.lr = 0.1f;
  s.params.momentum = 0.9f;
  s.grads = SgdGrads::unscaled(d_grads.get());
  s.master_fp32 = d_master.get();
  s.count = n;  // no momentum buffer, no 16-bit weights
  EXPECT_THROW(sgd_update_cuda(cuda, s), Error);
}

INSTANTIATE_TEST_SUITE_P(Precisions, Sgd, ::testing::ValuesIn(kBothPrecisions), precision_test_name);

}  // namespace
}  // namespace ddp::test
