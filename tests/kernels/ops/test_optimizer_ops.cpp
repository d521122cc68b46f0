// test_optimizer_ops.cpp: cuda_optimizer.cu's kernels (the unscale passes
// with their Inf/NaN flag, SGD from FP32 or 16-bit gradients, AdamW on a
// range, the one-thread step-state kernels) and cuda_common.cuh's two-pass
// sum (through the L2 norm) against the CPU loops, FP16 and BF16
// (op_test_support.h). Tolerances as tests/cuda/cuda_test_optimizer.cpp:
// the unscales are one exact widening and one FP32 multiply (bitwise); the
// L2 norm sums in double on both sides (kFp32RelTol); SGD's and AdamW's
// masters and moments are held to kFp32RelTol plus 1e-6 (nvcc contracts
// a * b + c into an FMA, g++ here does not: about one FP32 ulp of the
// terms on a GPU, bitwise under the executor), their 16-bit re-cast to two
// ulps of the format; the step state is doubles and integers from the same
// header code: bitwise.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_adamw.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_elementwise.h"
#include "kernels/cuda/cuda_optimizer.h"
#include "kernels/error.h"
#include "kernels/ops/op_test_support.h"

namespace ddp::test {
namespace {

using OptimizerOps = OpTest;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr double kFp16SubnormalStep = 6e-8;  // 2^-24: the 16-bit re-casts' floor

std::vector<float> nan_floats(size_t count) { return std::vector<float>(count, NAN); }

// Bitwise, NaNs as a class (the sign of zero counts).
void expect_same_float_bits(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < got.size() && reported < 5; ++i) {
    const bool ok = std::isnan(want[i]) ? std::isnan(got[i]) : bits_of(got[i]) == bits_of(want[i]);
    if (!ok) {
      ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << ", want " << want[i];
      ++reported;
    }
  }
}

// ---- unscale ------------------------------------------------------------------

// 16-bit gradients to FP32 times 1/S, the flag set by any non-finite result
// (an Inf or NaN gradient, or the multiply's overflow) and never cleared;
// the check alone (no FP32 output) and no flag; the scale by value and read
// from the device. Counts of one and past a block, the bad element first,
// in the middle and last.
TEST_P(OptimizerOps, UnscaleLowpIsTheCpusAndFlagsNonFinite) {
  SCOPED_TRACE(seed_text());
  int runs = 0;
  auto run = [&](const std::vector<lowp16>& grads, float inv_scale, int32_t flag_before, const std::string& what) {
    const size_t n = grads.size();
    std::vector<float> want(n);
    const bool bad = cpu::unscale_range(precision(), grads.data(), want.data(), n, inv_scale);
    const int32_t want_flag = bad ? 1 : flag_before;
    DeviceArray<lowp16> d_grads(grads);
    DeviceArray<float> d_scale(std::vector<float>{inv_scale});
    const bool scale_on_device = runs++ % 2 == 1;
    const ScalarArg scale = scale_on_device ? ScalarArg::at(d_scale.get()) : ScalarArg(inv_scale);
    const std::string w = what + (scale_on_device ? ", scale on the device" : "");
    DeviceArray<float> d_fp32(nan_floats(n));
    DeviceArray<int32_t> d_flag(std::vector<int32_t>{flag_before});
    launch_unscale_lowp_to_fp32(nullptr, precision(), d_grads.get(), d_fp32.get(), n, scale, d_flag.get());
    expect_same_float_bits(d_fp32.download(), want, w + ": grads_fp32");
    EXPECT_EQ(d_flag.download()[0], want_flag) << w << ": flag";
    // The check alone.
    d_flag.upload(std::vector<int32_t>{flag_before});
    launch_unscale_lowp_to_fp32(nullptr, precision(), d_grads.get(), nullptr, n, scale, d_flag.get());
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
    DeviceArray<lowp16> d_clean(clean);
    DeviceArray<float> d_fp32(nan_floats(n));
    launch_unscale_lowp_to_fp32(nullptr, precision(), d_clean.get(), d_fp32.get(), n, inv_scale, nullptr);
    std::vector<float> want(n);
    cpu::unscale_range(precision(), clean.data(), want.data(), n, inv_scale);
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
TEST_P(OptimizerOps, UnscaleFp32IsTheCpusInPlaceAndFlagsNonFinite) {
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
        std::vector<float> want(n);
        const bool found = cpu::unscale_fp32_range(grads.data(), want.data(), n, bad.inv_scale);
        EXPECT_EQ(found, !clean) << what;
        DeviceArray<float> d_in(grads), d_out(nan_floats(n));
        DeviceArray<int32_t> d_flag(std::vector<int32_t>{flag_before});
        launch_unscale_fp32(nullptr, d_in.get(), d_out.get(), n, bad.inv_scale, d_flag.get());
        expect_same_float_bits(d_out.download(), want, what);
        EXPECT_EQ(d_flag.download()[0], found ? 1 : flag_before) << what;
        DeviceArray<float> d_scale(std::vector<float>{bad.inv_scale});
        d_flag.upload(std::vector<int32_t>{flag_before});
        launch_unscale_fp32(nullptr, d_in.get(), d_in.get(), n, ScalarArg::at(d_scale.get()), d_flag.get());
        expect_same_float_bits(d_in.download(), want, what + ", in place");
        EXPECT_EQ(d_flag.download()[0], found ? 1 : flag_before) << what << ", in place";
      }
}

// ---- L2 norm (launch_sum: partial_sums_kernel, finish_sum_kernel) -------------

// Nothing (0), one, both sides of a block of 256, many blocks; and once
// (the FP16 instantiation: the input is FP32, so BF16 would repeat it)
// past the first pass's 1024 blocks, where every thread sums more than one
// element. Both sides sum squares in double: kFp32RelTol. An Inf or NaN
// anywhere gives the CPU's Inf or NaN.
TEST_P(OptimizerOps, L2NormMatchesTheCpu) {
  SCOPED_TRACE(seed_text());
  CpuBackend cpu(1, precision());
  std::vector<size_t> counts = {0, 1, 255, 257, 4099};
  if (precision() == Precision::Fp16) counts.push_back(size_t{1024} * 256 + 999);
  auto run = [&](const std::vector<float>& x, double rel, const std::string& what) {
    float want = NAN;
    cpu.l2_norm_fp32(x.data(), x.size(), &want);
    DeviceArray<float> d_x(x.empty() ? nan_floats(1) : x);
    DeviceArray<float> d_norm(nan_floats(1));
    DeviceArray<uint8_t> scratch(l2_norm_scratch_bytes());
    launch_l2_norm_fp32(nullptr, d_x.get(), x.size(), d_norm.get(), scratch.get());
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

// ---- SGD ------------------------------------------------------------------------

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
// FP32 gradients; the 16-bit re-cast written, or not (null).
TEST_P(OptimizerOps, SgdMatchesTheCpu) {
  SCOPED_TRACE(seed_text());
  const size_t n = 3001;
  const std::vector<float> grads = random_floats(rng, n);
  const std::vector<float> master_start = random_floats(rng, n), momentum_start = random_floats(rng, n);
  DeviceArray<float> d_grads(grads);
  DeviceArray<int32_t> d_no_skip(std::vector<int32_t>{0});
  for (const SgdVariant& v : sgd_variants())
    for (const bool recast : {true, false}) {
      const std::string what = std::string(v.name) + (recast ? "" : ", no 16-bit re-cast");
      std::vector<float> master = master_start, momentum = momentum_start;
      std::vector<lowp16> weights(n);
      DeviceArray<float> d_master(master_start), d_momentum(momentum_start);
      DeviceArray<lowp16> d_weights(LowpFormat::poison(n));
      SgdParams params = v.params;
      for (int step = 0; step < 2; ++step) {
        cpu::sgd_range(precision(), params, grads.data(), master.data(), v.momentum_buffer ? momentum.data() : nullptr,
                       weights.data(), n);
        launch_sgd_update(nullptr, precision(), params, d_grads.get(), d_master.get(),
                          v.momentum_buffer ? d_momentum.get() : nullptr, recast ? d_weights.get() : nullptr, n,
                          step == 0 ? d_no_skip.get() : nullptr);
        params.first_step = false;
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
// on the fly with the scale read from the device too: the CPU's fused loop
// on the same values; and on the device, bitwise the two-pass step
// (unscale to FP32, then SGD).
TEST_P(OptimizerOps, SgdFromLowpGradsMatchesTheCpuAndTheTwoPassStep) {
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
  for (int step = 0; step < 3; ++step) {
    const float lr = 0.01f * static_cast<float>(step + 1);
    host_params.lr = lr;
    host_params.first_step = step == 0;
    d_lr.upload(std::vector<float>{lr});
    d_initialized.upload(std::vector<int32_t>{step == 0 ? 0 : 1});
    cpu::sgd_lowp_grads_range(precision(), host_params, grads.data(), inv_scale, master.data(), momentum.data(),
                              weights.data(), n);
    launch_sgd_update_lowp_grads(nullptr, precision(), device_params, d_grads.get(), ScalarArg::at(d_scale.get()),
                                 d_master.get(), d_momentum.get(), d_weights.get(), n, nullptr);
    launch_unscale_lowp_to_fp32(nullptr, precision(), d_grads.get(), d_fp32.get(), n, inv_scale, nullptr);
    launch_sgd_update(nullptr, precision(), device_params, d_fp32.get(), d_master_two.get(), d_momentum_two.get(),
                      d_weights_two.get(), n, nullptr);
  }
  expect_close(d_master.download(), master, kFp32RelTol, 1e-6, "master_fp32");
  expect_close(d_momentum.download(), momentum, kFp32RelTol, 1e-6, "momentum_fp32");
  expect_close(fmt, d_weights.download(), weights, fmt.rel_tol(), kFp16SubnormalStep, "weights");
  expect_same_float_bits(d_master.download(), d_master_two.download(), "fused against two-pass: master_fp32");
  expect_same_float_bits(d_momentum.download(), d_momentum_two.download(), "fused against two-pass: momentum_fp32");
  expect_same_bits(fmt, d_weights.download(), d_weights_two.download(), "fused against two-pass: weights");
}

// A set skip flag (the overflow the unscale found) leaves every buffer as it
// was, bit for bit, on all three update kernels.
TEST_P(OptimizerOps, UpdatesSkippedWhenTheFlagIsSetChangeNothing) {
  SCOPED_TRACE(seed_text());
  const size_t n = 3001;
  const std::vector<float> master = random_floats(rng, n), momentum = random_floats(rng, n),
                           exp_avg_sq = random_floats(rng, n, 0.0f, 1.0f);
  const std::vector<lowp16> weights = fmt.random(rng, n), grads16 = fmt.random(rng, n);
  DeviceArray<float> d_grads(random_floats(rng, n)), d_master(master), d_momentum(momentum), d_v(exp_avg_sq);
  DeviceArray<lowp16> d_weights(weights), d_grads16(grads16);
  DeviceArray<int32_t> d_skip(std::vector<int32_t>{1});
  SgdParams p;
  p.lr = 0.1f;
  p.momentum = 0.9f;
  p.first_step = false;
  p.weight_decay = 0.01f;
  p.nesterov = true;
  launch_sgd_update(nullptr, precision(), p, d_grads.get(), d_master.get(), d_momentum.get(), d_weights.get(), n,
                    d_skip.get());
  launch_sgd_update_lowp_grads(nullptr, precision(), p, d_grads16.get(), 0.5f, d_master.get(), d_momentum.get(),
                               d_weights.get(), n, d_skip.get());
  AdamWBuffers b;
  b.grads_lowp = d_grads16.get();
  b.master_fp32 = d_master.get();
  b.exp_avg_fp32 = d_momentum.get();
  b.exp_avg_sq_fp32 = d_v.get();
  b.weights_lowp = d_weights.get();
  launch_adamw_update(nullptr, precision(), AdamWParams{}, b, 0.5f, 0, n, d_skip.get());
  expect_same_float_bits(d_master.download(), master, "master_fp32");
  expect_same_float_bits(d_momentum.download(), momentum, "momentum / exp_avg");
  expect_same_float_bits(d_v.download(), exp_avg_sq, "exp_avg_sq");
  expect_same_bits(fmt, d_weights.download(), weights, "weights");
}

// ---- AdamW ----------------------------------------------------------------------

// Four steps on a range that starts and ends mid-tensor, both gradient
// routes (FP32 from the device's unscale, 16-bit unscaled on the fly), the
// third skipped by the device flag, lr and t read from device memory, weight
// decay on a random mask or everywhere (no mask): the CPU's range loop on
// the same values, and nothing outside the range written.
TEST_P(OptimizerOps, AdamWOnARangeMatchesTheCpu) {
  SCOPED_TRACE(seed_text());
  const size_t n = 3001;
  const float inv_scale = 1.0f / 4096.0f;
  for (const bool masked : {true, false}) {
    const size_t offset = 1 + rng() % 99, count = n - offset - rng() % 99;
    const std::string what = "offset " + std::to_string(offset) + " count " + std::to_string(count) +
                             (masked ? ", decay mask" : ", decay everywhere");
    std::vector<uint8_t> mask(n);
    for (uint8_t& m : mask) m = static_cast<uint8_t>(rng() % 4 != 0);
    const std::vector<float> master_start = random_floats(rng, n);
    std::vector<float> master = master_start, exp_avg(n, 0.0f), exp_avg_sq(n, 0.0f), grads32(n, 0.0f);
    std::vector<lowp16> weights = LowpFormat::poison(n), grads16(n);
    DeviceArray<float> d_master(master), d_exp_avg(exp_avg), d_exp_avg_sq(exp_avg_sq), d_grads32(grads32);
    DeviceArray<lowp16> d_weights(weights), d_grads16(grads16);
    DeviceArray<uint8_t> d_mask(mask);
    DeviceArray<int32_t> d_skip(std::vector<int32_t>{0});
    DeviceArray<float> d_lr(std::vector<float>{0.0f});
    DeviceArray<int64_t> d_taken(std::vector<int64_t>{0});
    AdamWParams p;
    p.beta1 = 0.85;
    p.beta2 = 0.995;
    p.eps = 1e-8;
    p.weight_decay = 0.05;
    p.grad_multiplier = 0.8f;
    int64_t taken = 0;
    for (int k = 0; k < 4; ++k) {
      const bool skipped = k == 2, fp32_route = k % 2 == 1;
      float lr = std::uniform_real_distribution<float>(1e-3f, 1e-2f)(rng);
      grads16 = fmt.random(rng, n, -30000.0f, 30000.0f);
      d_grads16.upload(grads16);
      d_skip.upload(std::vector<int32_t>{skipped ? 1 : 0});
      d_lr.upload(std::vector<float>{lr});
      d_taken.upload(std::vector<int64_t>{taken});
      AdamWBuffers host, dev;
      host.grads_lowp = grads16.data();
      host.master_fp32 = master.data();
      host.exp_avg_fp32 = exp_avg.data();
      host.exp_avg_sq_fp32 = exp_avg_sq.data();
      host.weights_lowp = weights.data();
      host.decay_mask = masked ? mask.data() : nullptr;
      dev.grads_lowp = d_grads16.get();
      dev.master_fp32 = d_master.get();
      dev.exp_avg_fp32 = d_exp_avg.get();
      dev.exp_avg_sq_fp32 = d_exp_avg_sq.get();
      dev.weights_lowp = d_weights.get();
      dev.decay_mask = masked ? d_mask.get() : nullptr;
      if (fp32_route) {
        cpu::unscale_range(precision(), grads16.data(), grads32.data(), n, inv_scale);
        launch_unscale_lowp_to_fp32(nullptr, precision(), d_grads16.get(), d_grads32.get(), n, inv_scale, nullptr);
        host.grads_fp32 = grads32.data();
        dev.grads_fp32 = d_grads32.get();
      }
      AdamWParams host_params = p, dev_params = p;
      host_params.lr_ptr = &lr;
      host_params.steps_taken = &taken;
      dev_params.lr = NAN;     // must come from lr_ptr
      dev_params.step = 1000;  // must come from steps_taken
      dev_params.lr_ptr = d_lr.get();
      dev_params.steps_taken = d_taken.get();
      if (!skipped) cpu::adamw_range(precision(), adamw_scalars(host_params), host, inv_scale, offset, offset + count);
      launch_adamw_update(nullptr, precision(), dev_params, dev, inv_scale, offset, count, d_skip.get());
      if (!skipped) ++taken;
    }
    expect_close(d_master.download(), master, kFp32RelTol, 1e-6, what + ": master_fp32");
    expect_close(d_exp_avg.download(), exp_avg, kFp32RelTol, 1e-6, what + ": exp_avg");
    expect_close(d_exp_avg_sq.download(), exp_avg_sq, kFp32RelTol, 1e-6, what + ": exp_avg_sq");
    const std::vector<lowp16> got_weights = d_weights.download();
    expect_close(fmt, got_weights, weights, fmt.rel_tol(), kFp16SubnormalStep, what + ": weights");
    // expect_close takes poison (NaN) for NaN: outside the range, bit for bit.
    const std::vector<float> got_master = d_master.download();
    size_t outside = 0;
    for (size_t i = 0; i < n; ++i)
      if (i < offset || i >= offset + count)
        outside += bits_of(got_master[i]) != bits_of(master_start[i]) || got_weights[i].bits != kPoisonHalfBits;
    EXPECT_EQ(outside, 0u) << what << ": elements outside the range written";
  }
}

// ---- step state -----------------------------------------------------------------

// prepare and finish on the device give the host functions' state field
// for field (the same header code, doubles and integers: bitwise) over
// random runs of overflows, for a dynamic rule with hysteresis, a floor and
// a give-up count, and for a static one.
TEST_P(OptimizerOps, StepStatusPrepareAndFinishMatchTheHost) {
  SCOPED_TRACE(seed_text());
  LossScaleRule dynamic_rule;
  dynamic_rule.growth_interval = 3;
  dynamic_rule.hysteresis = 2;
  dynamic_rule.min_scale = 2.0;
  dynamic_rule.max_bad_steps = 3;
  LossScaleRule static_rule;
  static_rule.dynamic = 0;
  for (const LossScaleRule& rule : {dynamic_rule, static_rule}) {
    const std::string what = rule.dynamic ? "dynamic rule" : "static rule";
    StepStatus host{};
    host.scale = 65536.0;
    host.hysteresis_left = rule.hysteresis;
    DeviceArray<StepStatus> dev(std::vector<StepStatus>{host});
    for (int i = 0; i < 200; ++i) {
      const bool overflow = rng() % 3 == 0;
      const double backward_divisor = 1 + static_cast<double>(rng() % 4), unscale_divisor = 0.5 * (1 + rng() % 8);
      const float lr = 0.001f * static_cast<float>(1 + rng() % 100);
      step_status_prepare(host, backward_divisor, unscale_divisor, lr);
      launch_step_status_prepare(nullptr, dev.get(), backward_divisor, unscale_divisor, lr);
      if (overflow) {
        host.nonfinite = 1;
        std::vector<StepStatus> flagged = dev.download();
        flagged[0].nonfinite = 1;
        dev.upload(flagged);
      }
      step_status_finish(rule, host);
      launch_step_status_finish(nullptr, rule, dev.get());
      const StepStatus got = dev.download()[0];
      ASSERT_EQ(std::memcmp(&got, &host, sizeof got), 0)
          << what << ", step " << i << ": scale " << got.scale << " vs " << host.scale << ", skipped "
          << got.skipped_total << " vs " << host.skipped_total;
    }
  }
}

// ---- empty ranges and missing buffers --------------------------------------------

// An empty --zero range steps with null buffers and launches nothing; a
// non-empty one without a buffer it needs is refused (ddp::Error), as the
// CPU backend refuses it.
TEST_P(OptimizerOps, EmptyRangesLaunchNothingAndMissingBuffersAreRefused) {
  for (const float momentum : {0.0f, 0.9f}) {
    SgdParams s;
    s.lr = 0.1f;
    s.momentum = momentum;
    EXPECT_NO_THROW(launch_sgd_update(nullptr, precision(), s, nullptr, nullptr, nullptr, nullptr, 0, nullptr));
    EXPECT_NO_THROW(
        launch_sgd_update_lowp_grads(nullptr, precision(), s, nullptr, 0.5f, nullptr, nullptr, nullptr, 0, nullptr));
  }
  EXPECT_NO_THROW(launch_adamw_update(nullptr, precision(), AdamWParams{}, AdamWBuffers{}, 0.5f, 4096, 0, nullptr));
  EXPECT_NO_THROW(launch_unscale_lowp_to_fp32(nullptr, precision(), nullptr, nullptr, 0, 1.0f, nullptr));
  EXPECT_NO_THROW(launch_unscale_fp32(nullptr, nullptr, nullptr, 0, 1.0f, nullptr));
  const size_t n = 64;
  DeviceArray<float> d_master(std::vector<float>(n, 1.0f)), d_grads(std::vector<float>(n, 1.0f));
  SgdParams s;
  s.lr = 0.1f;
  s.momentum = 0.9f;
  EXPECT_THROW(launch_sgd_update(nullptr, precision(), s, d_grads.get(), d_master.get(), nullptr, nullptr, n, nullptr),
               Error);
  AdamWBuffers no_grads;
  no_grads.master_fp32 = d_master.get();
  EXPECT_THROW(launch_adamw_update(nullptr, precision(), AdamWParams{}, no_grads, 1.0f, 0, n, nullptr), Error);
}

INSTANTIATE_TEST_SUITE_P(Precisions, OptimizerOps, ::testing::ValuesIn(kBothPrecisions), precision_test_name);

}  // namespace
}  // namespace ddp::test
