// test_cpu_attention_kernels.cpp: CpuBackend's attention operations (the
// strided batched GEMM of the per-head products, the causal softmax forward
// and backward) and the tanh-GELU activation against double references on
// fresh random inputs, outputs poisoned first; the backward references
// against finite differences. Tolerances: cpu_kernel_support.h.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "cpu_kernel_support.h"
#include "support/gemm_epilogue_support.h"
#include "kernels/buffer.h"
#include "kernels/ops/causal_softmax.h"
#include "kernels/ops/gemm.h"
#include "support/transformer_reference.h"
#include "support/unfused_ops.h"

namespace ddp {
namespace {

using namespace test;

constexpr double kSub = 6e-8;
const Transpose kBoth[] = {Transpose::No, Transpose::Yes};

// One strided batched case: batch products op(A_i) op(B_i) with gaps
// between the matrices (strides longer than a matrix) that must stay as
// they were.
struct BatchedCase {
  int batch, m, n, k;
  Transpose ta, tb;
  float alpha, beta;
  int64_t stride_a() const { return static_cast<int64_t>(m) * k + 3; }
  int64_t stride_b() const { return static_cast<int64_t>(k) * n + 5; }
  int64_t stride_c() const { return static_cast<int64_t>(m) * n + 7; }
};

void check_batched(const LowpFormat& fmt, Backend& be, std::mt19937_64& rng, const BatchedCase& c) {
  SCOPED_TRACE("batch=" + std::to_string(c.batch) + " m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) +
               " k=" + std::to_string(c.k) + " ta=" + std::to_string(c.ta == Transpose::Yes) +
               " tb=" + std::to_string(c.tb == Transpose::Yes) + " beta=" + std::to_string(c.beta));
  const auto a = fmt.random(rng, c.batch * c.stride_a()), b = fmt.random(rng, c.batch * c.stride_b());
  const auto c0 = c.beta != 0.0f ? fmt.random(rng, c.batch * c.stride_c()) : fmt.poison(c.batch * c.stride_c());
  Buffer<lowp16> da(be, a.size()), db(be, b.size()), dc(be, c0.size());
  da.upload(a);
  db.upload(b);
  dc.upload(c0);
  GemmBatchedLowp batched;
  GemmLowp& g = batched.gemm;
  g.trans_a = c.ta;
  g.trans_b = c.tb;
  g.m = c.m;
  g.n = c.n;
  g.k = c.k;
  g.alpha = c.alpha;
  g.beta = c.beta;
  g.a = da.data();
  g.lda = c.ta == Transpose::Yes ? c.m : c.k;
  g.b = db.data();
  g.ldb = c.tb == Transpose::Yes ? c.k : c.n;
  g.c = dc.data();
  g.ldc = c.n;
  batched.batch_count = c.batch;
  batched.stride_a = c.stride_a();
  batched.stride_b = c.stride_b();
  batched.stride_c = c.stride_c();
  gemm_batched_lowp(be, batched);
  const auto got = dc.download();
  for (int z = 0; z < c.batch; ++z) {
    const size_t oa = z * c.stride_a(), ob = z * c.stride_b(), oc = z * c.stride_c();
    for (int i = 0; i < c.m; ++i)
      for (int j = 0; j < c.n; ++j) {
        double s = 0, mag = 0;
        for (int p = 0; p < c.k; ++p) {
          const double x = fmt.widen(a[oa + (c.ta == Transpose::Yes ? p * c.m + i : i * c.k + p)]);
          const double y = fmt.widen(b[ob + (c.tb == Transpose::Yes ? j * c.k + p : p * c.n + j)]);
          s += x * y;
          mag += std::fabs(x * y);
        }
        double want = c.alpha * s;
        if (c.beta != 0.0f) want += c.beta * static_cast<double>(fmt.widen(c0[oc + i * c.n + j]));
        ASSERT_TRUE(close_enough(fmt.widen(got[oc + i * c.n + j]), want, fmt.rel_tol(), 1e-5 * mag + kSub))
            << z << ": " << i << "," << j;
      }
    for (int64_t gap = static_cast<int64_t>(c.m) * c.n; gap < c.stride_c() && z + 1 < c.batch; ++gap)
      ASSERT_EQ(got[oc + gap].bits, c0[oc + gap].bits) << "gap after product " << z << " written";
  }
}

TEST_P(CpuLowpKernelsThreaded, BatchedGemmMatchesDoubleEveryTranspose) {
  for (Transpose ta : kBoth)
    for (Transpose tb : kBoth)
      for (CpuBackend* be : {&one, &two}) {
        // Many small products (shared out whole) and few large ones (each split).
        check_batched(fmt, *be, rng, BatchedCase{12, 16, 16, 8, ta, tb, 0.35355339f, 0.0f});
        check_batched(fmt, *be, rng, BatchedCase{1, 160, 144, 64, ta, tb, 1.0f, 0.0f});
        check_batched(fmt, *be, rng, BatchedCase{5, 9, 7, 5, ta, tb, 1.0f, 1.0f});
      }
}

TEST_P(CpuLowpKernels, BatchedGemmRefusesEpilogues) {
  Buffer<lowp16> x(cpu, 16);
  GemmBatchedLowp batched;
  GemmLowp& g = batched.gemm;
  g.m = g.n = g.k = 2;
  g.lda = g.ldb = g.ldc = 2;
  g.a = g.b = x.data();
  g.c = x.data() + 8;
  g.bias = x.data();
  batched.batch_count = 2;
  batched.stride_a = 4;
  batched.stride_b = 4;
  batched.stride_c = 4;
  EXPECT_THROW(gemm_batched_lowp(cpu, batched), Error);
}

struct SoftmaxCase {
  int bh, t;
  float scale;
  std::vector<lowp16> s, dp;
};

SoftmaxCase make_softmax_case(const LowpFormat& fmt, std::mt19937_64& rng, int bh, int t, int head_size) {
  return {bh, t, 1.0f / std::sqrt(static_cast<float>(head_size)), fmt.random(rng, bh * t * t, -8.0f, 8.0f),
          fmt.random(rng, bh * t * t)};
}

TEST_P(CpuLowpKernels, CausalSoftmaxForwardMatchesDouble) {
  const auto c = make_softmax_case(fmt, rng, 3, 19, 16);
  Buffer<lowp16> s(cpu, c.s.size()), p(cpu, c.s.size());
  s.upload(c.s);
  p.upload(fmt.poison(p.count()));
  CausalSoftmaxForward forward;
  forward.scores = s.data();
  forward.batch_heads = c.bh;
  forward.seq_len = c.t;
  forward.scale = c.scale;
  forward.probs = p.data();
  causal_softmax_forward_lowp(cpu, forward);
  const auto got = p.download();
  for (int z = 0; z < c.bh; ++z) {
    std::vector<double> sd(c.t * c.t);
    for (size_t i = 0; i < sd.size(); ++i) sd[i] = fmt.widen(c.s[z * c.t * c.t + i]);
    const auto ref = causal_softmax_reference(sd, c.t, c.scale);
    for (int i = 0; i < c.t * c.t; ++i)
      ASSERT_TRUE(close_enough(fmt.widen(got[z * c.t * c.t + i]), ref[i], fmt.rel_tol(), kSub)) << z << ": " << i;
  }
}

TEST_P(CpuLowpKernels, CausalSoftmaxMaskedPositionsAreExactlyZero) {
  // Masked scores that would dominate (or poison) the row if they were read.
  const int bh = 2, t = 17;
  auto scores = fmt.random(rng, bh * t * t);
  for (int z = 0; z < bh; ++z)
    for (int i = 0; i < t; ++i)
      for (int j = i + 1; j < t; ++j)
        scores[(z * t + i) * t + j] = (j % 3 == 0)   ? lowp16{fmt.nan_bits()}
                                      : (j % 3 == 1) ? lowp16{fmt.inf_bits()}
                                                     : fmt.narrow(60000.0f);
  const auto dp = fmt.random(rng, bh * t * t);
  Buffer<lowp16> s(cpu, scores.size()), p(cpu, scores.size()), d_dp(cpu, dp.size()), ds(cpu, dp.size());
  s.upload(scores);
  p.upload(fmt.poison(p.count()));
  d_dp.upload(dp);
  ds.upload(fmt.poison(ds.count()));
  CausalSoftmaxForward forward;
  forward.scores = s.data();
  forward.batch_heads = bh;
  forward.seq_len = t;
  forward.scale = 0.25f;
  forward.probs = p.data();
  causal_softmax_forward_lowp(cpu, forward);
  CausalSoftmaxBackward backward;
  backward.probs = p.data();
  backward.dprobs = d_dp.data();
  backward.batch_heads = bh;
  backward.seq_len = t;
  backward.scale = 0.25f;
  backward.dscores = ds.data();
  causal_softmax_backward_lowp(cpu, backward);
  const auto gp = p.download(), gds = ds.download();
  for (int z = 0; z < bh; ++z)
    for (int i = 0; i < t; ++i) {
      double row_sum = 0;
      for (int j = 0; j < t; ++j) {
        const size_t at = (z * t + i) * t + j;
        if (j > i) {
          ASSERT_EQ(gp[at].bits, 0u) << "p[" << i << "," << j << "] masked but not +0";
          ASSERT_EQ(gds[at].bits, 0u) << "ds[" << i << "," << j << "] masked but not +0";
        } else {
          ASSERT_TRUE(std::isfinite(fmt.widen(gp[at])) && std::isfinite(fmt.widen(gds[at])));
          row_sum += fmt.widen(gp[at]);
        }
      }
      ASSERT_NEAR(row_sum, 1.0, (i + 1) * fmt.rel_tol() / 4) << "row " << i;  // each p rounded once: half an ulp
    }
}

TEST_P(CpuLowpKernels, CausalSoftmaxGradientReferenceMatchesFiniteDifferences) {
  // L = sum(dp * softmax(scale * s)) over one matrix, central differences.
  const int t = 6;
  const double scale = 0.3;
  std::vector<double> s(t * t), dp(t * t);
  std::uniform_real_distribution<double> u(-2, 2);
  for (auto& v : s) v = u(rng);
  for (auto& v : dp) v = u(rng);
  const auto loss = [&] {
    const auto p = causal_softmax_reference(s, t, scale);
    double l = 0;
    for (size_t i = 0; i < p.size(); ++i) l += dp[i] * p[i];
    return l;
  };
  std::vector<double> ds, mag;
  causal_softmax_grad_reference(causal_softmax_reference(s, t, scale), dp, t, scale, ds, mag);
  const double h = 1e-6;
  for (size_t i = 0; i < s.size(); ++i) {
    const double keep = s[i];
    s[i] = keep + h;
    const double up = loss();
    s[i] = keep - h;
    const double down = loss();
    s[i] = keep;
    ASSERT_NEAR((up - down) / (2 * h), ds[i], 1e-7) << i;  // masked entries: both exactly 0
  }
}

TEST_P(CpuLowpKernels, CausalSoftmaxBackwardMatchesDouble) {
  const auto c = make_softmax_case(fmt, rng, 3, 21, 32);
  Buffer<lowp16> s(cpu, c.s.size()), p(cpu, c.s.size()), dp(cpu, c.dp.size()), ds(cpu, c.dp.size());
  s.upload(c.s);
  dp.upload(c.dp);
  ds.upload(fmt.poison(ds.count()));
  CausalSoftmaxForward forward;
  forward.scores = s.data();
  forward.batch_heads = c.bh;
  forward.seq_len = c.t;
  forward.scale = c.scale;
  forward.probs = p.data();
  causal_softmax_forward_lowp(cpu, forward);
  CausalSoftmaxBackward backward;
  backward.probs = p.data();
  backward.dprobs = dp.data();
  backward.batch_heads = c.bh;
  backward.seq_len = c.t;
  backward.scale = c.scale;
  backward.dscores = ds.data();
  causal_softmax_backward_lowp(cpu, backward);
  const auto got_p = p.download(), got = ds.download();
  for (int z = 0; z < c.bh; ++z) {
    // The reference from the FP16 probabilities the kernel reads.
    std::vector<double> pz(c.t * c.t), dpz(c.t * c.t), ref, mag;
    for (int i = 0; i < c.t * c.t; ++i)
      pz[i] = fmt.widen(got_p[z * c.t * c.t + i]), dpz[i] = fmt.widen(c.dp[z * c.t * c.t + i]);
    causal_softmax_grad_reference(pz, dpz, c.t, c.scale, ref, mag);
    for (int i = 0; i < c.t * c.t; ++i)
      ASSERT_TRUE(close_enough(fmt.widen(got[z * c.t * c.t + i]), ref[i], fmt.rel_tol(), 1e-5 * mag[i] + kSub))
          << z << ": " << i << " got " << fmt.widen(got[z * c.t * c.t + i]) << " want " << ref[i];
  }
}

// The double reference the GELU-tanh test below checks against.
TEST(GeluTanhReference, IsTheTanhFormAndItsDerivative) {
  // The tanh form, not the erf form: 10% apart at z = -3, far outside the
  // test's tolerance, so an erf kernel fails it.
  EXPECT_GT(std::fabs(gelu_tanh_exact(-3.0) - gelu_exact(-3.0)), 0.05 * std::fabs(gelu_exact(-3.0)));
  // The reference derivative against central differences of the reference.
  for (double zi = -5.0; zi <= 5.0; zi += 0.37)
    ASSERT_NEAR((gelu_tanh_exact(zi + 1e-6) - gelu_tanh_exact(zi - 1e-6)) / 2e-6, gelu_tanh_derivative_exact(zi), 1e-8);
}

// Every FP16 value through the CPU's GELU-tanh (cpu_gelu_tanh.h), its
// 8-lane loops and its portable loops: within 2 FP16 ulps of the double
// function, the derivative too, with a floor of 1e-7 absolute (where gelu'
// is near 0 or 1 and FP32 rounding of 1 + E shows). No looser floor where
// 1 + tanh(u) cancels (z < -2): the sigmoid form does not cancel, and a
// tanhf form fails here (3e-7 off at z = -4.4). +Inf gives +Inf and NaN
// NaN. The two loops give the same bits, and so does every range of length
// 1..19 over the same values (8-lane tails through the scalar twin).
TEST_P(CpuLowpKernelsThreaded, GeluTanhOnEveryHalfAndTailsAgree) {
  CpuBackend& cpu = one;
  std::vector<lowp16> z;
  for (uint32_t bits = 0; bits < 65536; ++bits) z.push_back(lowp16{static_cast<uint16_t>(bits)});
  const size_t n = z.size();
  const auto dy = fmt.random(rng, n);
  Buffer<lowp16> dz_in(cpu, n), ddy(cpu, n), out(cpu, n);
  dz_in.upload(z);
  ddy.upload(dy);
  std::vector<lowp16> f16c_y, f16c_dz;
  for (bool f16c : {true, false}) {
    SCOPED_TRACE(f16c ? "f16c" : "scalar");
    set_f16c_enabled(f16c);
    out.upload(fmt.poison(n));
    test::activation_forward_lowp(Activation::GeluTanh, dz_in.data(), out.data(), n, fmt.precision);
    const auto y = out.download();
    out.upload(fmt.poison(n));
    test::activation_backward_lowp(Activation::GeluTanh, dz_in.data(), ddy.data(), out.data(), n, fmt.precision);
    const auto dz = out.download();
    // The absolute floor: FP16's subnormal step; for BF16 1e-30, far
    // below its ulp at any |z| > 1e-28 but above what the exp term's ends
    // leave (gelu(z) of 1e-34 at z near -10 becomes -0, as in PyTorch's
    // float form).
    const double tiny = fmt.precision == Precision::Bf16 ? 1e-30 : kSub;
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) {
      const double zi = fmt.widen(z[i]), g = fmt.widen(dy[i]);
      if (std::isnan(zi)) {
        EXPECT_TRUE(std::isnan(fmt.widen(y[i])) && std::isnan(fmt.widen(dz[i]))) << "bits " << i;
        continue;
      }
      if (std::isinf(zi)) {
        if (zi > 0) {  // gelu(+Inf) = +Inf, gelu'(+Inf) = 1
          EXPECT_EQ(fmt.widen(y[i]), INFINITY);
          EXPECT_EQ(dz[i].bits, dy[i].bits) << "dz at +Inf";
        } else {  // -Inf x sigmoid(-Inf): NaN, as PyTorch's tanh form
          EXPECT_TRUE(std::isnan(fmt.widen(y[i]))) << "gelu(-Inf)";
        }
        continue;
      }
      const double floor = 1e-7 * std::fabs(g) + tiny;
      if ((!close_enough(fmt.widen(y[i]), gelu_tanh_exact(zi), fmt.rel_tol(), tiny) ||
           !close_enough(fmt.widen(dz[i]), g * gelu_tanh_derivative_exact(zi), fmt.rel_tol(), floor)) &&
          bad++ < 5)
        ADD_FAILURE() << "z=" << zi << " y=" << fmt.widen(y[i]) << " want " << gelu_tanh_exact(zi)
                      << " dz=" << fmt.widen(dz[i]) << " want " << g * gelu_tanh_derivative_exact(zi);
    }
    EXPECT_EQ(bad, 0u);
    if (f16c) {
      f16c_y = y;
      f16c_dz = dz;
    } else {
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(y[i].bits, f16c_y[i].bits) << "portable loop differs from F16C at z=" << fmt.widen(z[i]);
        ASSERT_EQ(dz[i].bits, f16c_dz[i].bits) << "portable loop differs from F16C at z=" << fmt.widen(z[i]);
      }
    }
    for (size_t len = 1; len < 20; ++len) {
      // z in [-4, -5], where 1 + tanh(u) cancels: a tail through a tanhf
      // form gives other bits there.
      const size_t minus4 = fmt.narrow(-4.0f).bits, minus5 = fmt.narrow(-5.0f).bits;
      const size_t at = minus4 + (minus5 - minus4) * len / 20;
      Buffer<lowp16> part(cpu, len);
      part.upload(fmt.poison(len));
      test::activation_forward_lowp(Activation::GeluTanh, dz_in.data() + at, part.data(), len, fmt.precision);
      const auto py = part.download();
      part.upload(fmt.poison(len));
      test::activation_backward_lowp(Activation::GeluTanh, dz_in.data() + at, ddy.data() + at, part.data(), len,
                                     fmt.precision);
      const auto pdz = part.download();
      for (size_t l = 0; l < len; ++l) {
        ASSERT_EQ(py[l].bits, y[at + l].bits) << "len " << len << " lane " << l;
        ASSERT_EQ(pdz[l].bits, dz[at + l].bits) << "len " << len << " lane " << l;
      }
    }
  }
}

}  // namespace
}  // namespace ddp
