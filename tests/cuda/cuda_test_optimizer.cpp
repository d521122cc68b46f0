// cuda_test_optimizer.cpp: CudaBackend's optimizer kernels (unscale with the
// non-finite flag, L2 norm, SGD variants, the fused SGD from 16-bit gradients,
// a skipped step, AdamW on a range with a decay mask and t read from the
// device) against CpuBackend on the same inputs, and the two backends'
// buffer checks (an empty range with null buffers passes, a missing buffer
// of a non-empty one throws). Tolerances: cuda_test_support.h.
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "cuda_test_support.h"
#include "kernels/error.h"
#include "kernels/ops/adamw.h"
#include "kernels/ops/l2_norm.h"
#include "kernels/ops/sgd.h"
#include "kernels/ops/unscale.h"

namespace ddp {
namespace {

using namespace test;  // cuda_test_support.h: CudaKernels, comparisons, tolerances

// ---- optimizer ----------------------------------------------------------------------

TEST_P(CudaLowpKernels, UnscaleFlagsInfAndNanAnywhere) {
  SCOPED_TRACE(seed_text());
  const size_t n = (size_t{1} << 20) + 7;
  const float inv_scale = 1.0f / 1024.0f;
  const auto clean = fmt.random(rng, n, -1000.0f, 1000.0f);
  auto run = [&](const std::vector<lowp16>& grads, int32_t flag_before, const std::string& what) {
    auto g16 = both(grads);
    auto g32 = both(nan_floats(n));
    auto flag = both(std::vector<int32_t>{flag_before});
    UnscaleLowpToFp32 unscale;
    unscale.count = n;
    unscale.inv_scale = inv_scale;
    unscale.grads_lowp = g16.cpu.data();
    unscale.grads_fp32 = g32.cpu.data();
    unscale.nonfinite_flag = flag.cpu.data();
    unscale_lowp_to_fp32(cpu, unscale);
    unscale.grads_lowp = g16.gpu.data();
    unscale.grads_fp32 = g32.gpu.data();
    unscale.nonfinite_flag = flag.gpu.data();
    unscale_lowp_to_fp32(*gpu, unscale);
    // One exact widening and one FP32 multiply: the same bits.
    expect_floats_equal(g32.gpu.download(), g32.cpu.download(), what + ": grads_fp32");
    const int32_t flag_cpu = flag.cpu.download()[0];
    EXPECT_EQ(flag.gpu.download()[0], flag_cpu) << what;
    return flag_cpu;
  };
  EXPECT_EQ(run(clean, 0, "clean"), 0);
  EXPECT_EQ(run(clean, 1, "clean, flag already set (never cleared)"), 1);
  for (uint16_t bad : {fmt.inf_bits(), fmt.neg_inf_bits(), fmt.nan_bits()}) {
    const size_t pos = std::uniform_int_distribution<size_t>(0, n - 1)(rng);
    auto poisoned = clean;
    poisoned[pos].bits = bad;
    EXPECT_EQ(run(poisoned, 0, "bits " + std::to_string(bad) + " at " + std::to_string(pos)), 1);
  }
  // The very last element too (grid-stride tail).
  auto last = clean;
  last[n - 1].bits = fmt.inf_bits();
  EXPECT_EQ(run(last, 0, "Inf at the last element"), 1);
}

// The FP32 sums' unscale: one multiply (bitwise the CPU's), in place or
// not, the flag set by an Inf, a NaN or an overflow anywhere (the
// grid-stride tail too), never cleared.
TEST_F(CudaKernels, UnscaleFp32MatchesTheCpuAndFlagsNonFinite) {
  SCOPED_TRACE(seed_text());
  const size_t n = (size_t{1} << 20) + 7;
  const float inv_scale = 1.0f / 3000.0f;
  const auto g = test::random_floats(rng, n, -1e4f, 1e4f);
  auto in = both(g);
  auto out = both(nan_floats(n));
  auto flag = both(std::vector<int32_t>{0});
  UnscaleFp32 unscale;
  unscale.count = n;
  unscale.inv_scale = inv_scale;
  unscale.grads_in = in.cpu.data();
  unscale.grads_out = out.cpu.data();
  unscale.nonfinite_flag = flag.cpu.data();
  unscale_fp32(cpu, unscale);
  unscale.grads_in = in.gpu.data();
  unscale.grads_out = out.gpu.data();
  unscale.nonfinite_flag = flag.gpu.data();
  unscale_fp32(*gpu, unscale);
  expect_floats_equal(out.gpu.download(), out.cpu.download(), "unscaled");
  EXPECT_EQ(flag.gpu.download()[0], 0);
  unscale.grads_out = in.gpu.data();
  unscale_fp32(*gpu, unscale);
  expect_floats_equal(in.gpu.download(), out.cpu.download(), "in place");
  const float inf = std::numeric_limits<float>::infinity();
  for (const float bad : {inf, -inf, std::nanf(""), 3e38f}) {
    for (const size_t pos : {size_t{0}, n / 2 + 3, n - 1}) {
      auto poisoned = g;
      poisoned[pos] = bad;
      in.gpu.upload(poisoned);
      flag.gpu.upload(std::vector<int32_t>{0});
      unscale.grads_out = out.gpu.data();
      unscale.inv_scale = bad == 3e38f ? 10.0f : inv_scale;
      unscale_fp32(*gpu, unscale);
      EXPECT_EQ(flag.gpu.download()[0], 1) << bad << " at " << pos;
    }
  }
  flag.gpu.upload(std::vector<int32_t>{1});
  in.gpu.upload(g);
  unscale.grads_out = out.gpu.data();
  unscale.inv_scale = inv_scale;
  unscale_fp32(*gpu, unscale);
  EXPECT_EQ(flag.gpu.download()[0], 1) << "a clean pass cleared the flag";
}

TEST_F(CudaKernels, L2Norm) {
  SCOPED_TRACE(seed_text());
  for (size_t n : {size_t{0}, size_t{1}, size_t{1000}, (size_t{1} << 20) + 3}) {
    auto x = both(test::random_floats(rng, n, -3.0f, 3.0f));
    auto norm = both(nan_floats(1));
    L2NormFp32 l2;
    l2.count = n;
    l2.x = x.cpu.data();
    l2.norm = norm.cpu.data();
    l2_norm_fp32(cpu, l2);
    l2.x = x.gpu.data();
    l2.norm = norm.gpu.data();
    l2_norm_fp32(*gpu, l2);
    // Both accumulate in double.
    expect_close(fmt, norm.gpu.download(), norm.cpu.download(), kFp32RelTol, 0.0, "norm n=" + std::to_string(n));
  }
  const size_t n = 4099;
  for (float bad : {std::numeric_limits<float>::infinity(), std::nanf("")}) {
    auto host = test::random_floats(rng, n);
    host[std::uniform_int_distribution<size_t>(0, n - 1)(rng)] = bad;
    auto x = both(host);
    auto norm = both(std::vector<float>{0.0f});
    L2NormFp32 l2;
    l2.count = n;
    l2.x = x.cpu.data();
    l2.norm = norm.cpu.data();
    l2_norm_fp32(cpu, l2);
    l2.x = x.gpu.data();
    l2.norm = norm.gpu.data();
    l2_norm_fp32(*gpu, l2);
    expect_floats_equal(norm.gpu.download(), norm.cpu.download(), "norm with a non-finite");
  }
}

TEST_P(CudaLowpKernels, SgdVariants) {
  SCOPED_TRACE(seed_text());
  const size_t n = 100003;
  struct Variant {
    const char* name;
    SgdParams params;
    bool momentum_buffer;
  };
  std::vector<Variant> variants;
  {
    SgdParams p;
    p.lr = 0.1f;
    variants.push_back({"plain, no momentum buffer", p, false});
    p.momentum = 0.9f;
    p.first_step = true;
    variants.push_back({"momentum first step", p, true});
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
  }
  const auto grads_host = test::random_floats(rng, n);
  const auto master_host = test::random_floats(rng, n);
  const auto momentum_host = test::random_floats(rng, n);
  auto grads = both(grads_host);
  for (const Variant& v : variants) {
    SCOPED_TRACE(v.name);
    auto master = both(master_host);
    auto momentum = both(momentum_host);
    auto weights = both(test::poison_halves(n));
    auto skip = both(std::vector<int32_t>{0});
    float* m_cpu = v.momentum_buffer ? momentum.cpu.data() : nullptr;
    float* m_gpu = v.momentum_buffer ? momentum.gpu.data() : nullptr;
    // Two steps on the same state; the second with first_step cleared.
    SgdParams params = v.params;
    for (int step = 0; step < 2; ++step) {
      SgdUpdate sgd;
      sgd.params = params;
      sgd.count = n;
      sgd.grads = SgdGrads::unscaled(grads.cpu.data());
      sgd.master_fp32 = master.cpu.data();
      sgd.momentum_fp32 = m_cpu;
      sgd.weights_lowp = weights.cpu.data();
      sgd.skip_flag = skip.cpu.data();
      sgd_update(cpu, sgd);
      sgd.grads = SgdGrads::unscaled(grads.gpu.data());
      sgd.master_fp32 = master.gpu.data();
      sgd.momentum_fp32 = m_gpu;
      sgd.weights_lowp = weights.gpu.data();
      sgd.skip_flag = step == 0 ? skip.gpu.data() : nullptr;
      sgd_update(*gpu, sgd);
      params.first_step = false;
    }
    expect_close(fmt, master.gpu.download(), master.cpu.download(), kFp32RelTol, 1e-6, "master_fp32");
    expect_close(fmt, momentum.gpu.download(), momentum.cpu.download(), kFp32RelTol, 1e-6, "momentum_fp32");
    expect_close(fmt, weights.gpu.download(), weights.cpu.download(), fmt.rel_tol(), kFp16SubnormalStep,
                 "weights_lowp");
  }
}

// The fused step (check pass over the 16-bit gradients only, then SGD unscaling on the fly)
// gives the bits of the two-pass step (unscale to FP32, then SGD) on the
// device, and the check alone still flags an Inf.
TEST_P(CudaLowpKernels, FusedSgdFromFp16GradsMatchesUnscaleThenSgdBitwise) {
  SCOPED_TRACE(seed_text());
  const size_t n = 100003;
  const float inv_scale = 1.0f / 4096.0f;
  std::vector<lowp16> grads_host = fmt.random(rng, n, -60000.0f, 60000.0f);
  const auto master_host = test::random_floats(rng, n), momentum_host = test::random_floats(rng, n);
  SgdParams p;
  p.lr = 0.05f;
  p.momentum = 0.9f;
  p.first_step = false;
  p.weight_decay = 1e-4f;
  p.grad_multiplier = 0.75f;
  Buffer<lowp16> grads(*gpu, n), w_two(*gpu, n), w_fused(*gpu, n);
  Buffer<float> grads_fp32(*gpu, n), m_two(*gpu, n), m_fused(*gpu, n), mom_two(*gpu, n), mom_fused(*gpu, n);
  Buffer<int32_t> flag(*gpu, 1);
  grads.upload(grads_host);
  m_two.upload(master_host);
  m_fused.upload(master_host);
  mom_two.upload(momentum_host);
  mom_fused.upload(momentum_host);
  w_two.upload(test::poison_halves(n));
  w_fused.upload(test::poison_halves(n));
  flag.zero();
  UnscaleLowpToFp32 unscale;
  unscale.grads_lowp = grads.data();
  unscale.grads_fp32 = grads_fp32.data();
  unscale.count = n;
  unscale.inv_scale = inv_scale;
  unscale.nonfinite_flag = flag.data();
  unscale_lowp_to_fp32(*gpu, unscale);
  SgdUpdate sgd;
  sgd.params = p;
  sgd.grads = SgdGrads::unscaled(grads_fp32.data());
  sgd.master_fp32 = m_two.data();
  sgd.momentum_fp32 = mom_two.data();
  sgd.weights_lowp = w_two.data();
  sgd.count = n;
  sgd.skip_flag = flag.data();
  sgd_update(*gpu, sgd);
  unscale.grads_fp32 = nullptr;
  unscale_lowp_to_fp32(*gpu, unscale);
  sgd.grads = SgdGrads::scaled(grads.data(), inv_scale);
  sgd.master_fp32 = m_fused.data();
  sgd.momentum_fp32 = mom_fused.data();
  sgd.weights_lowp = w_fused.data();
  sgd_update(*gpu, sgd);
  EXPECT_EQ(flag.download()[0], 0);
  EXPECT_EQ(m_fused.download(), m_two.download());
  EXPECT_EQ(mom_fused.download(), mom_two.download());
  const auto a = w_fused.download(), b = w_two.download();
  size_t differ = 0;
  for (size_t i = 0; i < n; ++i) differ += a[i].bits != b[i].bits;
  EXPECT_EQ(differ, 0u);
  // One Inf at a random position: the check-only pass flags it.
  grads_host[rng() % n].bits = fmt.inf_bits();
  grads.upload(grads_host);
  unscale_lowp_to_fp32(*gpu, unscale);
  EXPECT_EQ(flag.download()[0], 1);
}

TEST_P(CudaLowpKernels, SgdSkippedWhenFlagSetChangesNothing) {
  SCOPED_TRACE(seed_text());
  const size_t n = 100003;
  const auto master_host = test::random_floats(rng, n);
  const auto momentum_host = test::random_floats(rng, n);
  const auto weights_host = fmt.random(rng, n);
  Buffer<float> grads(*gpu, n), master(*gpu, n), momentum(*gpu, n);
  Buffer<lowp16> weights(*gpu, n);
  Buffer<int32_t> skip(*gpu, 1);
  grads.upload(test::random_floats(rng, n));
  master.upload(master_host);
  momentum.upload(momentum_host);
  weights.upload(weights_host);
  skip.upload(std::vector<int32_t>{1});
  SgdParams p;
  p.lr = 0.1f;
  p.momentum = 0.9f;
  p.first_step = false;
  p.weight_decay = 0.01f;
  p.nesterov = true;
  SgdUpdate sgd;
  sgd.params = p;
  sgd.grads = SgdGrads::unscaled(grads.data());
  sgd.master_fp32 = master.data();
  sgd.momentum_fp32 = momentum.data();
  sgd.weights_lowp = weights.data();
  sgd.count = n;
  sgd.skip_flag = skip.data();
  sgd_update(*gpu, sgd);
  // Bitwise: not one element may move.
  EXPECT_EQ(master.download(), master_host);
  EXPECT_EQ(momentum.download(), momentum_host);
  const auto w = weights.download();
  size_t changed = 0;
  for (size_t i = 0; i < n; ++i) changed += w[i].bits != weights_host[i].bits;
  EXPECT_EQ(changed, 0u);
}

// AdamW over four steps, both gradient routes, one skipped (flag on the
// device), t and lr read from device memory, decay on a random mask, on a
// range that starts mid-tensor: CUDA within FP32 tolerance of the CPU (FMA
// contraction, as SGD), and nothing outside the range written on either.
TEST_P(CudaLowpKernels, AdamWOnARangeMatchesCpu) {
  SCOPED_TRACE(seed_text());
  const size_t n = 100003;
  const size_t offset = 1 + rng() % 999, count = n - offset - rng() % 999;
  const float inv_scale = 1.0f / 4096.0f;
  std::vector<uint8_t> mask_host(n);
  for (uint8_t& m : mask_host) m = static_cast<uint8_t>(rng() % 4 != 0);
  const auto master_host = test::random_floats(rng, n);
  auto master = both(master_host);
  auto exp_avg = both(std::vector<float>(n, 0.0f));
  auto exp_avg_sq = both(std::vector<float>(n, 0.0f));
  auto weights = both(test::poison_halves(n));
  auto mask = both(mask_host);
  auto grads16 = both(fmt.random(rng, n));
  auto grads32 = both(std::vector<float>(n, 0.0f));
  auto skip = both(std::vector<int32_t>{0});
  auto lr = both(std::vector<float>{0.0f});
  auto steps_taken = both(std::vector<int64_t>{0});
  AdamWParams p;
  p.beta1 = 0.85;
  p.beta2 = 0.995;
  p.eps = 1e-8;
  p.weight_decay = 0.05;
  p.grad_multiplier = 0.8f;
  int64_t taken = 0;
  for (int k = 0; k < 4; ++k) {
    const bool skipped = k == 2, fp32_route = k % 2 == 1;
    const std::vector<float> lr_now = {std::uniform_real_distribution<float>(1e-3f, 1e-2f)(rng)};
    const std::vector<lowp16> g = fmt.random(rng, n, -30000.0f, 30000.0f);
    const std::vector<int32_t> flag = {skipped ? 1 : 0};
    const std::vector<int64_t> t = {taken};
    for (auto* b : {&grads16.cpu, &grads16.gpu}) b->upload(g);
    for (auto* b : {&skip.cpu, &skip.gpu}) b->upload(flag);
    for (auto* b : {&lr.cpu, &lr.gpu}) b->upload(lr_now);
    for (auto* b : {&steps_taken.cpu, &steps_taken.gpu}) b->upload(t);
    struct Side {
      Buffer<lowp16>* grads16;
      Buffer<float>*master, *exp_avg, *exp_avg_sq;
      Buffer<lowp16>* weights;
      Buffer<uint8_t>* mask;
    };
    auto buffers = [](const Side& side) {
      AdamWBuffers b;
      b.grads_lowp = side.grads16->data();
      b.master_fp32 = side.master->data();
      b.exp_avg_fp32 = side.exp_avg->data();
      b.exp_avg_sq_fp32 = side.exp_avg_sq->data();
      b.weights_lowp = side.weights->data();
      b.decay_mask = side.mask->data();
      return b;
    };
    const Side on_cpu{&grads16.cpu, &master.cpu, &exp_avg.cpu, &exp_avg_sq.cpu, &weights.cpu, &mask.cpu};
    const Side on_gpu{&grads16.gpu, &master.gpu, &exp_avg.gpu, &exp_avg_sq.gpu, &weights.gpu, &mask.gpu};
    AdamWBuffers bc = buffers(on_cpu), bg = buffers(on_gpu);
    if (fp32_route) {
      UnscaleLowpToFp32 unscale;
      unscale.count = n;
      unscale.inv_scale = inv_scale;
      unscale.nonfinite_flag = nullptr;
      unscale.grads_lowp = grads16.cpu.data();
      unscale.grads_fp32 = grads32.cpu.data();
      unscale_lowp_to_fp32(cpu, unscale);
      unscale.grads_lowp = grads16.gpu.data();
      unscale.grads_fp32 = grads32.gpu.data();
      unscale_lowp_to_fp32(*gpu, unscale);
      bc.grads_fp32 = grads32.cpu.data();
      bg.grads_fp32 = grads32.gpu.data();
    }
    AdamWParams pc = p, pg = p;
    pc.lr_ptr = lr.cpu.data();
    pc.steps_taken = steps_taken.cpu.data();
    pg.lr_ptr = lr.gpu.data();
    pg.steps_taken = steps_taken.gpu.data();
    AdamWUpdate adamw;
    adamw.inv_scale = inv_scale;
    adamw.offset = offset;
    adamw.count = count;
    adamw.params = pc;
    adamw.buffers = bc;
    adamw.skip_flag = skip.cpu.data();
    adamw_update(cpu, adamw);
    adamw.params = pg;
    adamw.buffers = bg;
    adamw.skip_flag = skip.gpu.data();
    adamw_update(*gpu, adamw);
    if (!skipped) ++taken;
  }
  const std::string what = "offset " + std::to_string(offset) + " count " + std::to_string(count);
  expect_close(fmt, master.gpu.download(), master.cpu.download(), kFp32RelTol, 1e-6, what + ": master_fp32");
  expect_close(fmt, exp_avg.gpu.download(), exp_avg.cpu.download(), kFp32RelTol, 1e-6, what + ": exp_avg");
  expect_close(fmt, exp_avg_sq.gpu.download(), exp_avg_sq.cpu.download(), kFp32RelTol, 1e-6, what + ": exp_avg_sq");
  expect_close(fmt, weights.gpu.download(), weights.cpu.download(), fmt.rel_tol(), kFp16SubnormalStep,
               what + ": weights");
  const auto m_gpu = master.gpu.download();
  const auto w_gpu = weights.gpu.download();
  size_t outside = 0;
  for (size_t i = 0; i < n; ++i)
    if (i < offset || i >= offset + count)
      outside += m_gpu[i] != master_host[i] || w_gpu[i].bits != test::kPoisonHalfBits;
  EXPECT_EQ(outside, 0u) << what;
  EXPECT_NE(m_gpu, master_host);
}

// A rank whose --zero range is empty steps a count of 0 with null state
// buffers every step, as its peers step theirs. The launchers once checked
// the momentum buffer and the gradients before they looked at the count,
// so `mpirun -np 3 ddp_train --device cuda --data synthetic --zero 1`
// threw on every step of such a rank; now both backends accept the call
// and launch or touch nothing (the CPU side: test_cpu_optimizer.cpp).
TEST_F(CudaKernels, EmptyRangeWithNullBuffersIsANoOpOnBothBackends) {
  const int32_t no_skip_host = 0;
  Buffer<int32_t> no_skip_gpu(*gpu, 1);
  no_skip_gpu.upload(std::vector<int32_t>{0});
  for (Backend* be : {static_cast<Backend*>(&cpu), static_cast<Backend*>(gpu.get())}) {
    SCOPED_TRACE(be->description());
    const int32_t* skip = be == &cpu ? &no_skip_host : no_skip_gpu.data();
    for (float momentum : {0.0f, 0.9f}) {
      SgdParams s;
      s.lr = 0.1f;
      s.momentum = momentum;
      SgdUpdate sgd;
      sgd.params = s;
      sgd.grads = SgdGrads::unscaled(nullptr);
      sgd.master_fp32 = nullptr;
      sgd.momentum_fp32 = nullptr;
      sgd.weights_lowp = nullptr;
      sgd.count = 0;
      sgd.skip_flag = skip;
      EXPECT_NO_THROW(sgd_update(*be, sgd)) << "momentum " << momentum;
      sgd.grads = SgdGrads::scaled(nullptr, 0.5f);
      sgd.skip_flag = nullptr;
      EXPECT_NO_THROW(sgd_update(*be, sgd)) << "momentum " << momentum << ", 16-bit gradients";
    }
    AdamWParams a;
    a.lr = 1e-3f;
    AdamWUpdate adamw;
    adamw.params = a;
    adamw.buffers = AdamWBuffers{};
    adamw.inv_scale = 0.5f;
    adamw.offset = 4096;
    adamw.count = 0;
    adamw.skip_flag = skip;
    EXPECT_NO_THROW(adamw_update(*be, adamw));
    EXPECT_NO_THROW(be->synchronize());  // nothing was launched that could fail
  }
}

// With a count, a buffer the step needs is refused alike on both backends.
TEST_F(CudaKernels, MissingBuffersOfANonEmptyRangeAreRefusedOnBothBackends) {
  const size_t n = 64;
  const std::vector<float> ones(n, 1.0f);
  auto master = both(ones);
  auto grads = both(ones);
  for (bool on_gpu : {false, true}) {
    Backend& be = on_gpu ? static_cast<Backend&>(*gpu) : static_cast<Backend&>(cpu);
    float* m = on_gpu ? master.gpu.data() : master.cpu.data();
    const float* g = on_gpu ? grads.gpu.data() : grads.cpu.data();
    SgdParams s;
    s.lr = 0.1f;
    s.momentum = 0.9f;
    SgdUpdate sgd;
    sgd.params = s;
    sgd.grads = SgdGrads::unscaled(g);
    sgd.master_fp32 = m;
    sgd.momentum_fp32 = nullptr;
    sgd.weights_lowp = nullptr;
    sgd.count = n;
    sgd.skip_flag = nullptr;
    EXPECT_THROW(sgd_update(be, sgd), Error) << on_gpu;
    AdamWParams a;
    AdamWBuffers no_grads;
    no_grads.master_fp32 = m;
    AdamWUpdate adamw;
    adamw.params = a;
    adamw.buffers = no_grads;
    adamw.inv_scale = 1.0f;
    adamw.offset = 0;
    adamw.count = n;
    adamw.skip_flag = nullptr;
    EXPECT_THROW(adamw_update(be, adamw), Error) << on_gpu;
  }
}

}  // namespace
}  // namespace ddp
