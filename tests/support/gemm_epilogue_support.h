// gemm_epilogue_support.h: one GemmLowp epilogue case (shape, transposes,
// strides, bias / activation / pre-activation / activation gradient / bias
// gradient), its random inputs, a run on any Backend with every output
// poisoned first, and the double-precision reference. Shared by
// test_gemm_epilogues.cpp (CpuBackend against double and against the unfused
// sequence) and cuda_test_gemm_epilogues.cpp (CudaBackend against CpuBackend).
#pragma once

#include <cmath>
#include <random>
#include <vector>

#include "kernels/backend.h"
#include "kernels/ops/gemm.h"
#include "kernels/buffer.h"
#include "support/lowp_format.h"
#include "support/test_support.h"

namespace ddp::test {

// The activation as the flags spell it, for a case's description.
inline const char* activation_name(Activation a) {
  switch (a) {
    case Activation::Relu:
      return "relu";
    case Activation::Gelu:
      return "gelu";
    case Activation::GeluTanh:
      return "gelu-tanh";
    default:
      return "none";
  }
}

struct EpilogueCase {
  int m = 1, n = 1, k = 1;
  Transpose trans_a = Transpose::No, trans_b = Transpose::No;
  float alpha = 1.0f;
  float beta = 0.0f;  // with a bias or a bias gradient, not with an activation
  bool bias = false;
  Activation act = Activation::None;
  bool pre_activation = false;
  Activation dact = Activation::None;
  bool bias_grad = false, bias_grad_accumulate = false;
  int pad = 0;        // extra elements in every row stride (A, B, C, Z, pre-activation)
  size_t offset = 0;  // every operand starts this many elements into its buffer (unaligned views)
  // Z only on the 17 FP16 values around gelu'(z) = 0 (z = -0.7518), where
  // cdf + z pdf cancels: the hardest place for GELU's gradient (the tanh
  // form's derivative has its zero there too, within 1e-3).
  bool z_near_gelu_prime_zero = false;

  int lda() const { return (trans_a == Transpose::Yes ? m : k) + pad; }
  int ldb() const { return (trans_b == Transpose::Yes ? k : n) + pad; }
  int ldc() const { return n + pad; }
  size_t a_count() const { return offset + static_cast<size_t>(trans_a == Transpose::Yes ? k : m) * lda(); }
  size_t b_count() const { return offset + static_cast<size_t>(trans_b == Transpose::Yes ? n : k) * ldb(); }
  size_t c_count() const { return offset + static_cast<size_t>(m) * ldc(); }
  // op(A)[i, p] and op(B)[p, j] in the stored arrays.
  size_t a_index(int i, int p) const {
    return offset +
           (trans_a == Transpose::Yes ? static_cast<size_t>(p) * lda() + i : static_cast<size_t>(i) * lda() + p);
  }
  size_t b_index(int p, int j) const {
    return offset +
           (trans_b == Transpose::Yes ? static_cast<size_t>(j) * ldb() + p : static_cast<size_t>(p) * ldb() + j);
  }
  size_t c_index(int i, int j) const { return offset + static_cast<size_t>(i) * ldc() + j; }
};

struct EpilogueInputs {
  std::vector<lowp16> a, b, bias, dact_input, c0, bias_grad0;
};

struct EpilogueOutputs {
  std::vector<lowp16> c, pre_activation, bias_grad;
};

inline EpilogueInputs make_epilogue_inputs(std::mt19937_64& rng, const EpilogueCase& c,
                                           const LowpFormat& fmt = LowpFormat{}) {
  EpilogueInputs in;
  in.a = fmt.random(rng, c.a_count());
  in.b = fmt.random(rng, c.b_count());
  in.bias = fmt.random(rng, c.offset + static_cast<size_t>(c.n));
  // Z over the range where GELU's derivative varies, with exact zeros and
  // negative zeros mixed in (relu'(0) = 0, also for -0).
  in.dact_input = fmt.random(rng, c.c_count(), -3.0f, 3.0f);
  for (size_t i = 0; i < in.dact_input.size(); i += 7) in.dact_input[i] = fmt.narrow(i % 2 ? 0.0f : -0.0f);
  if (c.z_near_gelu_prime_zero)
    for (auto& z : in.dact_input) {
      z = fmt.narrow(-0.7518f);
      z.bits = static_cast<uint16_t>(z.bits + static_cast<int>(rng() % 17) - 8);  // +-8 ulps, same sign and exponent
    }
  in.c0 = c.beta != 0.0f ? fmt.random(rng, c.c_count()) : LowpFormat::poison(c.c_count());
  in.bias_grad0 = c.bias_grad_accumulate ? fmt.random(rng, c.offset + static_cast<size_t>(c.m))
                                         : LowpFormat::poison(c.offset + static_cast<size_t>(c.m));
  return in;
}

inline GemmLowp epilogue_gemm(const EpilogueCase& c, const lowp16* a, const lowp16* b, const lowp16* bias,
                              const lowp16* z, lowp16* out, lowp16* pre, lowp16* db) {
  GemmLowp g;
  g.trans_a = c.trans_a;
  g.trans_b = c.trans_b;
  g.m = c.m;
  g.n = c.n;
  g.k = c.k;
  g.alpha = c.alpha;
  g.beta = c.beta;
  g.a = a + c.offset;
  g.lda = c.lda();
  g.b = b + c.offset;
  g.ldb = c.ldb();
  g.c = out + c.offset;
  g.ldc = c.ldc();
  if (c.bias) g.bias = bias + c.offset;
  g.act = c.act;
  if (c.pre_activation) {
    g.pre_activation = pre + c.offset;
    g.ld_pre_activation = c.ldc();
  }
  g.dact = c.dact;
  if (c.dact != Activation::None) {
    g.dact_input = z + c.offset;
    g.ld_dact_input = c.ldc();
  }
  if (c.bias_grad) {
    g.bias_grad = db + c.offset;
    g.bias_grad_accumulate = c.bias_grad_accumulate;
  }
  return g;
}

// Runs the case on `backend`: inputs uploaded, outputs poisoned (C holds c0,
// poison unless beta != 0), the GEMM, outputs downloaded whole (padding too).
inline EpilogueOutputs run_epilogue_case(Backend& backend, const EpilogueCase& c, const EpilogueInputs& in) {
  Buffer<lowp16> a(backend, in.a.size()), b(backend, in.b.size()), bias(backend, in.bias.size()),
      z(backend, in.dact_input.size()), out(backend, in.c0.size()), pre(backend, c.c_count()),
      db(backend, in.bias_grad0.size());
  a.upload(in.a);
  b.upload(in.b);
  bias.upload(in.bias);
  z.upload(in.dact_input);
  out.upload(in.c0);
  pre.upload(poison_halves(pre.count()));
  db.upload(in.bias_grad0);
  gemm_lowp(backend, epilogue_gemm(c, a.data(), b.data(), bias.data(), z.data(), out.data(), pre.data(), db.data()));
  EpilogueOutputs o;
  o.c = out.download();
  if (c.pre_activation) o.pre_activation = pre.download();
  if (c.bias_grad) o.bias_grad = db.download();
  return o;
}

// Exact (double) values of the case: v = alpha * op(A) op(B) + beta * C0 +
// bias (the pre-activation), the output act(v) or act'(z) * v, the bias
// gradient; per element sum|terms|, the scale of the FP32 summation error;
// and c_slope_error, an absolute bound on what the FP32 evaluation of
// gelu'(z) = cdf(z) + z pdf(z) adds to C. The two terms cancel near z =
// -0.7518 (gelu' = 0), so an error of a few FP32 ulps in each (erff and
// expf of CUDA and glibc differ by up to 2 ulps) is no longer small against
// the slope itself (~4e-4 relative for the FP16 z next to the zero), while
// the summation floor, scaled by |gelu'(z)|, vanishes there. We allow
// 4 * 2^-24 * (|cdf| + |z pdf|) * |v|, about 1e-7 * |v|.
struct EpilogueReference {
  std::vector<double> pre_activation, c, c_magnitude, c_slope_error, bias_grad, bias_grad_magnitude;  // [m * n], [m]
};

inline double gelu_exact(double z) { return 0.5 * z * (1.0 + std::erf(z / std::sqrt(2.0))); }
inline double gelu_cdf_exact(double z) { return 0.5 * (1.0 + std::erf(z / std::sqrt(2.0))); }
inline double gelu_pdf_exact(double z) { return std::exp(-0.5 * z * z) / std::sqrt(2.0 * M_PI); }
inline double gelu_derivative_exact(double z) { return gelu_cdf_exact(z) + z * gelu_pdf_exact(z); }

// GPT-2's tanh form, nn.GELU(approximate='tanh'), and its two derivative
// terms 0.5 (1 + t) and 0.5 z (1 - t^2) u'(z), t = tanh(u(z)): they cancel
// near z = -0.75 as cdf and z pdf do for the erf form. Evaluated through
// 0.5 (1 + t) = s = 1 / (1 + E), E = e^-2u, and 1 - t^2 = 4 s^2 E, which
// do not cancel where t nears -1: 1 + tanh(u) in double loses all its
// digits below z = -6 (BF16's outputs there, 1e-14 and less, need them).
inline double gelu_tanh_u(double z) { return std::sqrt(2.0 / M_PI) * (z + 0.044715 * z * z * z); }
inline double gelu_tanh_e(double z) { return std::exp(-2.0 * gelu_tanh_u(z)); }
inline double gelu_tanh_exact(double z) { return z / (1.0 + gelu_tanh_e(z)); }
inline double gelu_tanh_term1(double z) { return 1.0 / (1.0 + gelu_tanh_e(z)); }
inline double gelu_tanh_term2(double z) {
  const double e = gelu_tanh_e(z), s = 1.0 / (1.0 + e);
  const double s_one_minus_s = std::isinf(e) ? 0.0 : s * s * e;  // s (1 - s); 0 where e overflows
  return 2.0 * z * s_one_minus_s * std::sqrt(2.0 / M_PI) * (1.0 + 3.0 * 0.044715 * z * z);
}
inline double gelu_tanh_derivative_exact(double z) { return gelu_tanh_term1(z) + gelu_tanh_term2(z); }
// An absolute bound on the error of the FP32 evaluation of that derivative
// (gelu_tanh_backward): tanhf is within 2 ulps, so t near +-1 carries up to
// 2.4e-7 absolute, which 1 + t passes on to term 1 (halved) and 1 - t^2 to
// term 2 (doubled, times 0.5 |z| u'(z)). For |z| > 3 both terms are tiny
// and that absolute error dominates any relative one. Twice the estimate.
inline double gelu_tanh_derivative_fp32_error(double z) {
  const double du = std::sqrt(2.0 / M_PI) * (1.0 + 3.0 * 0.044715 * z * z);
  return 2.0 * (1.2e-7 + 2.4e-7 * std::fabs(z) * du);
}

inline EpilogueReference epilogue_reference(const EpilogueCase& c, const EpilogueInputs& in,
                                            const LowpFormat& fmt = LowpFormat{}) {
  EpilogueReference r;
  const size_t mn = static_cast<size_t>(c.m) * c.n;
  r.pre_activation.assign(mn, 0.0);
  r.c.assign(mn, 0.0);
  r.c_magnitude.assign(mn, 0.0);
  r.c_slope_error.assign(mn, 0.0);
  for (int i = 0; i < c.m; ++i)
    for (int j = 0; j < c.n; ++j) {
      double s = 0, s_abs = 0;
      for (int p = 0; p < c.k; ++p) {
        const double t = static_cast<double>(fmt.widen(in.a[c.a_index(i, p)])) * fmt.widen(in.b[c.b_index(p, j)]);
        s += t;
        s_abs += std::fabs(t);
      }
      double v = c.alpha * s;
      if (c.beta != 0.0f) v += c.beta * static_cast<double>(fmt.widen(in.c0[c.c_index(i, j)]));
      if (c.bias) v += fmt.widen(in.bias[c.offset + j]);
      const size_t at = static_cast<size_t>(i) * c.n + j;
      r.pre_activation[at] = v;
      double out = v, slope = 1.0;
      if (c.dact == Activation::Relu) slope = fmt.widen(in.dact_input[c.c_index(i, j)]) > 0.0f ? 1.0 : 0.0;
      if (c.dact == Activation::Gelu) {
        const double z = fmt.widen(in.dact_input[c.c_index(i, j)]);
        slope = gelu_derivative_exact(z);
        r.c_slope_error[at] = 4.0 * std::ldexp(1.0, -24) *
                              (std::fabs(gelu_cdf_exact(z)) + std::fabs(z * gelu_pdf_exact(z))) * std::fabs(v);
      }
      if (c.dact == Activation::GeluTanh) {
        const double z = fmt.widen(in.dact_input[c.c_index(i, j)]);
        slope = gelu_tanh_derivative_exact(z);
        r.c_slope_error[at] = gelu_tanh_derivative_fp32_error(z) * std::fabs(v);
      }
      out *= slope;
      if (c.act == Activation::Relu) out = out > 0 ? out : 0.0;
      if (c.act == Activation::Gelu) {
        out = gelu_exact(out);
        slope = 1.13;  // max |gelu'|
      }
      if (c.act == Activation::GeluTanh) {
        out = gelu_tanh_exact(out);
        slope = 1.13;  // max |gelu_tanh'|
      }
      r.c[at] = out;
      r.c_magnitude[at] = std::fabs(slope) * (std::fabs(c.alpha) * s_abs + std::fabs(v));
    }
  r.bias_grad.assign(c.m, 0.0);
  r.bias_grad_magnitude.assign(c.m, 0.0);
  for (int i = 0; i < c.m; ++i) {
    double s = c.bias_grad_accumulate ? fmt.widen(in.bias_grad0[c.offset + i]) : 0.0, s_abs = std::fabs(s);
    for (int p = 0; p < c.k; ++p) {
      const double t = fmt.widen(in.a[c.a_index(i, p)]);
      s += t;
      s_abs += std::fabs(t);
    }
    r.bias_grad[i] = s;
    r.bias_grad_magnitude[i] = s_abs;
  }
  return r;
}

}  // namespace ddp::test
