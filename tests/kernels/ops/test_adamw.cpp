// test_adamw.cpp: the AdamW step on a range (kernels/ops/adamw.h), FP16
// and BF16: the CUDA row against the CPU row over steps from FP32 and from
// 16-bit gradients, one skipped by the device flag, with and without a
// decay mask, nothing outside the range written; a skipped step, an empty
// range and missing gradients (op_test_support.h). Tolerances as
// tests/cuda/cuda_test_optimizer.cpp: the masters and moments are held to
// kFp32RelTol plus 1e-6 (nvcc contracts a * b + c into an FMA, g++ here
// does not: about one FP32 ulp of the terms on a GPU, bitwise under the
// executor), the 16-bit re-cast to two ulps of the format.
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/error.h"
#include "kernels/ops/adamw.h"
#include "kernels/ops/op_test_support.h"
#include "kernels/ops/unscale.h"
#include "support/test_cuda_op_context.h"

namespace ddp::test {
namespace {

class AdamW : public OpTest {
 protected:
  CpuBackend cpu{2, precision()};
  TestCudaOpContext cuda{precision()};
};

constexpr double kFp16SubnormalStep = 6e-8;  // 2^-24: the 16-bit re-casts' floor

// Four steps on a range that starts and ends mid-tensor, both gradient
// routes (FP32 from the unscale's rows, 16-bit unscaled on the fly), the
// third skipped by the flag, lr and t read from memory (the CUDA row's from
// device memory), weight decay on a random mask or everywhere (no mask):
// the CPU row on the same values, and nothing outside the range written.
TEST_P(AdamW, OnARangeMatchesTheCpu) {
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
      const int32_t skip = skipped ? 1 : 0;
      grads16 = fmt.random(rng, n, -30000.0f, 30000.0f);
      d_grads16.upload(grads16);
      d_skip.upload(std::vector<int32_t>{skip});
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
        UnscaleLowpToFp32 unscale;
        unscale.grads_lowp = grads16.data();
        unscale.grads_fp32 = grads32.data();
        unscale.count = n;
        unscale.inv_scale = inv_scale;
        unscale_lowp_to_fp32(cpu, unscale);
        unscale.grads_lowp = d_grads16.get();
        unscale.grads_fp32 = d_grads32.get();
        unscale_lowp_to_fp32_cuda(cuda, unscale);
        host.grads_fp32 = grads32.data();
        dev.grads_fp32 = d_grads32.get();
      }
      AdamWUpdate op;
      op.inv_scale = inv_scale;
      op.offset = offset;
      op.count = count;
      // The CPU row on the host vectors, its lr, t and skip flag in host memory.
      op.params = p;
      op.params.lr_ptr = &lr;
      op.params.steps_taken = &taken;
      op.buffers = host;
      op.skip_flag = &skip;
      adamw_update(cpu, op);
      // The CUDA row on device copies.
      op.params = p;
      op.params.lr = NAN;     // must come from lr_ptr
      op.params.step = 1000;  // must come from steps_taken
      op.params.lr_ptr = d_lr.get();
      op.params.steps_taken = d_taken.get();
      op.buffers = dev;
      op.skip_flag = d_skip.get();
      adamw_update_cuda(cuda, op);
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

// A set skip flag (the overflow the unscale found) leaves every buffer as it
// was, bit for bit, on the CUDA row (SGD's: test_sgd.cpp).
TEST_P(AdamW, UpdatesSkippedWhenTheFlagIsSetChangeNothing) {
  SCOPED_TRACE(seed_text());
  const size_t n = 3001;
  const std::vector<float> master = random_floats(rng, n), exp_avg = random_floats(rng, n),
                           exp_avg_sq = random_floats(rng, n, 0.0f, 1.0f);
  const std::vector<lowp16> weights = fmt.random(rng, n), grads16 = fmt.random(rng, n);
  DeviceArray<float> d_master(master), d_exp_avg(exp_avg), d_exp_avg_sq(exp_avg_sq);
  DeviceArray<lowp16> d_weights(weights), d_grads16(grads16);
  DeviceArray<int32_t> d_skip(std::vector<int32_t>{1});
  AdamWUpdate op;
  op.buffers.grads_lowp = d_grads16.get();
  op.buffers.master_fp32 = d_master.get();
  op.buffers.exp_avg_fp32 = d_exp_avg.get();
  op.buffers.exp_avg_sq_fp32 = d_exp_avg_sq.get();
  op.buffers.weights_lowp = d_weights.get();
  op.inv_scale = 0.5f;
  op.offset = 0;
  op.count = n;
  op.skip_flag = d_skip.get();
  adamw_update_cuda(cuda, op);
  expect_same_float_bits(d_master.download(), master, "master_fp32");
  expect_same_float_bits(d_exp_avg.download(), exp_avg, "exp_avg");
  expect_same_float_bits(d_exp_avg_sq.download(), exp_avg_sq, "exp_avg_sq");
  expect_same_bits(fmt, d_weights.download(), weights, "weights");
}

// An empty --zero range steps with null buffers and the CUDA row launches
// nothing; a non-empty one without gradients is refused (ddp::Error), as
// the CPU row refuses it (optimizer_preconditions.h).
TEST_P(AdamW, EmptyRangesLaunchNothingAndMissingBuffersAreRefused) {
  AdamWUpdate empty;  // every pointer null
  empty.inv_scale = 0.5f;
  empty.offset = 4096;
  empty.count = 0;
  EXPECT_NO_THROW(adamw_update_cuda(cuda, empty));
  const size_t n = 64;
  DeviceArray<float> d_master(std::vector<float>(n, 1.0f));
  AdamWUpdate no_grads;
  no_grads.buffers.master_fp32 = d_master.get();
  no_grads.inv_scale = 1.0f;
  no_grads.offset = 0;
  no_grads.count = n;
  EXPECT_THROW(adamw_update_cuda(cuda, no_grads), Error);
}

INSTANTIATE_TEST_SUITE_P(Precisions, AdamW, ::testing::ValuesIn(kBothPrecisions), precision_test_name);

}  // namespace
}  // namespace ddp::test
