// test_cpu_adamw.cpp: CpuBackend's AdamW step against an independent
// double-precision transcription of torch.optim.AdamW over several steps,
// some skipped (non-finite gradients), with decay on the weights only (the
// registry's flags through the store's mask) and t kept in the step state;
// on a sub-range of the flat buffers; split over threads, F16C or not, and
// fused from FP16 gradients, bitwise equal to one scalar pass; a skipped
// step changes nothing.
//
// Tolerance of the transcription: every step is a few FP32 operations per
// element on values of order 1 (|g| <= 1, v <= 1, lr <= 1e-2), so each
// result lies within ~1e-6 relative of the exact value and the error grows
// by that each step; 1e-5 relative plus 1e-6 absolute over 7 steps. A wrong
// t, a decay on a bias, or a moment updated on a skipped step moves a value
// by ~lr * 0.1 = 1e-3 or more.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "cpu_kernel_support.h"
#include "kernels/buffer.h"
#include "kernels/ops/adamw.h"
#include "kernels/ops/step_state.h"
#include "kernels/ops/unscale.h"
#include "trainer/params/parameter_store.h"

namespace ddp {
namespace {

using namespace test;  // cpu_kernel_support.h

// torch.optim.AdamW's _single_tensor_adam (decoupled weight decay), in
// double, written from its source and not from adamw_math.h: lerp for the
// first moment, step_t counted here.
struct TorchAdamW {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  std::vector<double> param, exp_avg, exp_avg_sq;
  int64_t step_t = 0;

  void step(const std::vector<double>& grad, const std::vector<bool>& decays) {
    step_t += 1;
    const double bias_correction1 = 1 - std::pow(beta1, static_cast<double>(step_t));
    const double bias_correction2 = 1 - std::pow(beta2, static_cast<double>(step_t));
    const double step_size = lr / bias_correction1;
    const double bias_correction2_sqrt = std::sqrt(bias_correction2);
    for (size_t i = 0; i < param.size(); ++i) {
      if (decays[i]) param[i] *= 1 - lr * weight_decay;
      exp_avg[i] += (grad[i] - exp_avg[i]) * (1 - beta1);  // exp_avg.lerp_(grad, 1 - beta1)
      exp_avg_sq[i] = exp_avg_sq[i] * beta2 + (1 - beta2) * grad[i] * grad[i];
      const double denom = std::sqrt(exp_avg_sq[i]) / bias_correction2_sqrt + eps;
      param[i] += -step_size * exp_avg[i] / denom;
    }
  }
};

ParameterRegistry two_linear_layers() {
  ParameterRegistry r;
  register_linear_parameters(r, "0", 301, 67, 0);  // odd sizes: padding between tensors, ragged lanes
  register_linear_parameters(r, "2", 67, 29, 2);
  return r;
}

void expect_close_all(const std::vector<float>& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!close_enough(got[i], want[i], 1e-5, 1e-6) && bad++ == 0) first = i;
  EXPECT_EQ(bad, 0u) << what << ": first at " << first << ": " << got[first] << " vs " << want[first];
}

TEST_P(CpuLowpKernels, AdamWMatchesTorchOverStepsWithSkipsAndDecayOnWeightsOnly) {
  const ParameterRegistry registry = two_linear_layers();
  ParameterStore store(cpu, registry);
  store.allocate_adamw_state();
  const size_t n = store.count();
  const std::vector<float> init = registry.initial_values(rng());
  store.set_master_weights(init);

  // The mask is the registry's flags: weights decay, biases and padding do not.
  const std::vector<uint8_t> mask = store.weight_decay_mask.download();
  std::vector<bool> decays(n, false);
  for (const ParameterTensor& t : registry.tensors()) {
    EXPECT_EQ(t.weight_decay, t.name.find("bias") == std::string::npos) << t.name;
    for (size_t i = t.offset; i < t.offset + t.count; ++i) decays[i] = t.weight_decay;
  }
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(mask[i] != 0, decays[i]) << "element " << i;

  TorchAdamW ref;
  ref.beta1 = 0.8 + 0.15 * std::uniform_real_distribution<double>(0, 1)(rng);
  ref.beta2 = 0.99 + 0.009 * std::uniform_real_distribution<double>(0, 1)(rng);
  ref.eps = 1e-8;
  ref.weight_decay = 0.1;
  ref.param.assign(init.begin(), init.end());
  ref.exp_avg.assign(n, 0.0);
  ref.exp_avg_sq.assign(n, 0.0);

  StepStatus status{};
  status.scale = 1024.0;
  LossScaleRule rule;
  rule.dynamic = 0;
  const bool skipped[] = {false, false, true, false, true, true, false};
  for (int k = 0; k < 7; ++k) {
    SCOPED_TRACE("step " + std::to_string(k));
    const float lr = std::uniform_real_distribution<float>(1e-3f, 1e-2f)(rng);
    StepStatusPrepare prepare;
    prepare.status = &status;
    prepare.backward_divisor = 1.0;
    prepare.unscale_divisor = 1.0;
    prepare.lr = lr;
    step_status_prepare(cpu, prepare);
    // Loss-scaled FP16 gradients, zero in the padding (nothing writes there).
    std::vector<lowp16> g16(n, lowp16{0});
    for (const ParameterTensor& t : registry.tensors()) {
      const auto values = fmt.random(rng, t.count, -1024.0f, 1024.0f);
      std::copy(values.begin(), values.end(), g16.begin() + static_cast<std::ptrdiff_t>(t.offset));
    }
    if (skipped[k])
      g16[registry[rng() % registry.size()].offset].bits = k == 4 ? fmt.nan_bits() : fmt.inf_bits();  // NaN / Inf
    store.grads_lowp.upload(g16);
    store.weights_lowp.upload(fmt.poison(n));
    // Alternate the two routes of the optimizer: fused from FP16, and
    // unscaled to FP32 with a clip coefficient.
    const bool fp32_route = k % 2 == 1;
    const float clip = fp32_route ? 0.625f : 1.0f;
    UnscaleLowpToFp32 unscale;
    unscale.grads_lowp = store.grads_lowp.data();
    unscale.grads_fp32 = fp32_route ? store.grads_fp32.data() : nullptr;
    unscale.count = n;
    unscale.inv_scale = ScalarArg::at(&status.inv_scale);
    unscale.nonfinite_flag = &status.nonfinite;
    unscale_lowp_to_fp32(cpu, unscale);
    EXPECT_EQ(status.nonfinite != 0, skipped[k]);
    AdamWParams p;
    p.lr_ptr = &status.lr;
    p.steps_taken = &status.steps_taken;
    p.beta1 = ref.beta1;
    p.beta2 = ref.beta2;
    p.eps = ref.eps;
    p.weight_decay = ref.weight_decay;
    p.grad_multiplier = clip;
    p.step = 1000;  // ignored: steps_taken is set
    AdamWBuffers b;
    b.grads_fp32 = fp32_route ? store.grads_fp32.data() : nullptr;
    b.grads_lowp = store.grads_lowp.data();
    b.master_fp32 = store.master_weights_fp32.data();
    b.exp_avg_fp32 = store.momentum_fp32.data();
    b.exp_avg_sq_fp32 = store.second_moment_fp32.data();
    b.weights_lowp = store.weights_lowp.data();
    b.decay_mask = store.weight_decay_mask.data();
    AdamWUpdate adamw;
    adamw.params = p;
    adamw.buffers = b;
    adamw.inv_scale = ScalarArg::at(&status.inv_scale);
    adamw.offset = 0;
    adamw.count = n;
    adamw.skip_flag = &status.nonfinite;
    adamw_update(cpu, adamw);
    StepStatusFinish finish;
    finish.rule = rule;
    finish.status = &status;
    step_status_finish(cpu, finish);

    if (!skipped[k]) {  // GradScaler skips optimizer.step(): torch's state stays
      ref.lr = lr;
      std::vector<double> grad(n);
      for (size_t i = 0; i < n; ++i) grad[i] = static_cast<double>(fmt.widen(g16[i])) / 1024.0 * clip;
      ref.step(grad, decays);
    }
    EXPECT_EQ(status.steps_taken, ref.step_t);
    const std::vector<float> master = store.master_weights_fp32.download();
    expect_close_all(master, ref.param, "master");
    expect_close_all(store.momentum_fp32.download(), ref.exp_avg, "exp_avg");
    expect_close_all(store.second_moment_fp32.download(), ref.exp_avg_sq, "exp_avg_sq");
    const std::vector<lowp16> w = store.weights_lowp.download();
    for (size_t i = 0; i < n; ++i)
      ASSERT_EQ(w[i].bits, skipped[k] ? kPoisonHalfBits : fmt.narrow(master[i]).bits) << "weight " << i;
  }
  // Padding: zero gradients leave zero weights and moments.
  std::vector<bool> in_tensor(n, false);
  for (const ParameterTensor& t : registry.tensors())
    for (size_t i = t.offset; i < t.offset + t.count; ++i) in_tensor[i] = true;
  const std::vector<float> master = store.master_weights_fp32.download(), v = store.second_moment_fp32.download();
  size_t padding = 0;
  for (size_t i = 0; i < n; ++i)
    if (!in_tensor[i]) {
      ++padding;
      ASSERT_TRUE(master[i] == 0.0f && v[i] == 0.0f) << "padding element " << i;
    }
  EXPECT_GT(padding, 0u);  // the layout does have padding here
}

// Random AdamW inputs over n elements (moments as after a few steps).
struct AdamWInputs {
  std::vector<lowp16> grads_lowp;
  std::vector<float> master, exp_avg, exp_avg_sq;
  std::vector<uint8_t> mask;
  AdamWInputs(const LowpFormat& fmt, std::mt19937_64& rng, size_t n)
      : grads_lowp(fmt.random(rng, n, -30000.0f, 30000.0f)),
        master(random_floats(rng, n)),
        exp_avg(random_floats(rng, n, -0.5f, 0.5f)),
        exp_avg_sq(random_floats(rng, n, 0.0f, 0.5f)),
        mask(n) {
    for (uint8_t& m : mask) m = static_cast<uint8_t>(rng() % 3 == 0 ? 0 : 1 + rng() % 200);  // any non-zero decays
  }
};

struct AdamWRun {
  std::vector<float> master, exp_avg, exp_avg_sq;
  std::vector<lowp16> weights;
};

// One adamw_update on copies of `in`, weights poisoned first.
AdamWRun run_adamw(Backend& be, const AdamWInputs& in, const AdamWParams& p, float inv_scale, bool fp32_route,
                   bool with_mask, size_t offset, size_t count, int32_t skip = 0) {
  const size_t n = in.master.size();
  AdamWRun r{in.master, in.exp_avg, in.exp_avg_sq, LowpFormat::poison(n)};
  std::vector<float> g32(n);
  int32_t flag = 0;
  if (fp32_route) {
    UnscaleLowpToFp32 unscale;
    unscale.grads_lowp = in.grads_lowp.data();
    unscale.grads_fp32 = g32.data();
    unscale.count = n;
    unscale.inv_scale = inv_scale;
    unscale.nonfinite_flag = &flag;
    unscale_lowp_to_fp32(be, unscale);
  }
  AdamWBuffers b;
  b.grads_fp32 = fp32_route ? g32.data() : nullptr;
  b.grads_lowp = in.grads_lowp.data();
  b.master_fp32 = r.master.data();
  b.exp_avg_fp32 = r.exp_avg.data();
  b.exp_avg_sq_fp32 = r.exp_avg_sq.data();
  b.weights_lowp = r.weights.data();
  b.decay_mask = with_mask ? in.mask.data() : nullptr;
  AdamWUpdate adamw;
  adamw.params = p;
  adamw.buffers = b;
  adamw.inv_scale = inv_scale;
  adamw.offset = offset;
  adamw.count = count;
  adamw.skip_flag = &skip;
  adamw_update(be, adamw);
  return r;
}

size_t bit_differences(const AdamWRun& a, const AdamWRun& b) {
  size_t d = 0;
  for (size_t i = 0; i < a.master.size(); ++i)
    d += bits_of(a.master[i]) != bits_of(b.master[i]) || bits_of(a.exp_avg[i]) != bits_of(b.exp_avg[i]) ||
         bits_of(a.exp_avg_sq[i]) != bits_of(b.exp_avg_sq[i]) || a.weights[i].bits != b.weights[i].bits;
  return d;
}

AdamWParams random_params(std::mt19937_64& rng) {
  AdamWParams p;
  p.lr = std::uniform_real_distribution<float>(1e-4f, 1e-2f)(rng);
  p.weight_decay = 0.05;
  p.grad_multiplier = 0.75f;
  p.step = 1 + static_cast<int64_t>(rng() % 50);
  return p;
}

// Threads, F16C lanes and the fused FP16 route change no bit: two threads
// with F16C, fused, equal one thread without F16C, unscaled to FP32 first.
TEST_P(CpuLowpKernelsThreaded, AdamWBitwiseEqualsScalarLoopOnEveryRoute) {
  const size_t n = kLarge;
  const AdamWInputs in(fmt, rng, n);
  const AdamWParams p = random_params(rng);
  const float inv_scale = 1.0f / 32768.0f;
  for (bool with_mask : {true, false}) {
    SCOPED_TRACE(with_mask ? "mask" : "no mask (all decay)");
    const AdamWRun fused_two = run_adamw(two, in, p, inv_scale, false, with_mask, 0, n);
    const AdamWRun fp32_two = run_adamw(two, in, p, inv_scale, true, with_mask, 0, n);
    set_f16c_enabled(false);
    const AdamWRun fp32_scalar = run_adamw(one, in, p, inv_scale, true, with_mask, 0, n);
    const AdamWRun fused_scalar = run_adamw(one, in, p, inv_scale, false, with_mask, 0, n);
    set_f16c_enabled(true);
    EXPECT_EQ(bit_differences(fused_two, fp32_scalar), 0u);
    EXPECT_EQ(bit_differences(fp32_two, fp32_scalar), 0u);
    EXPECT_EQ(bit_differences(fused_scalar, fp32_scalar), 0u);
    EXPECT_NE(fused_two.master, in.master);  // the step did move the weights
  }
}

// A range [offset, offset + count) gets exactly the full pass's values;
// nothing outside it is written.
TEST_P(CpuLowpKernelsThreaded, AdamWOnARangeTouchesOnlyThatRange) {
  const size_t n = kLarge;
  const AdamWInputs in(fmt, rng, n);
  const AdamWParams p = random_params(rng);
  const float inv_scale = 1.0f / 1024.0f;
  const AdamWRun full = run_adamw(two, in, p, inv_scale, false, true, 0, n);
  const size_t offset = 1 + rng() % (n / 3), count = 8 * 1024 * 5 + rng() % 9999;  // mid-lane start, threaded length
  for (bool fp32_route : {false, true}) {
    const AdamWRun part = run_adamw(two, in, p, inv_scale, fp32_route, true, offset, count);
    size_t inside = 0, outside = 0;
    for (size_t i = 0; i < n; ++i) {
      const bool in_range = i >= offset && i < offset + count;
      if (in_range)
        inside += bits_of(part.master[i]) != bits_of(full.master[i]) ||
                  bits_of(part.exp_avg[i]) != bits_of(full.exp_avg[i]) ||
                  bits_of(part.exp_avg_sq[i]) != bits_of(full.exp_avg_sq[i]) ||
                  part.weights[i].bits != full.weights[i].bits;
      else
        outside += bits_of(part.master[i]) != bits_of(in.master[i]) ||
                   bits_of(part.exp_avg[i]) != bits_of(in.exp_avg[i]) ||
                   bits_of(part.exp_avg_sq[i]) != bits_of(in.exp_avg_sq[i]) || part.weights[i].bits != kPoisonHalfBits;
    }
    EXPECT_EQ(inside, 0u) << "offset " << offset << " count " << count << (fp32_route ? " fp32" : " fused");
    EXPECT_EQ(outside, 0u) << "offset " << offset << " count " << count << (fp32_route ? " fp32" : " fused");
  }
}

TEST_P(CpuLowpKernelsThreaded, AdamWSkippedWhenFlagSetChangesNothing) {
  const size_t n = kLarge;
  const AdamWInputs in(fmt, rng, n);
  for (bool fp32_route : {false, true}) {
    const AdamWRun r = run_adamw(two, in, random_params(rng), 1.0f / 1024.0f, fp32_route, true, 0, n, /*skip=*/1);
    EXPECT_EQ(r.master, in.master);
    EXPECT_EQ(r.exp_avg, in.exp_avg);
    EXPECT_EQ(r.exp_avg_sq, in.exp_avg_sq);
    size_t written = 0;
    for (const lowp16& w : r.weights) written += w.bits != kPoisonHalfBits;
    EXPECT_EQ(written, 0u);
  }
}

}  // namespace
}  // namespace ddp
