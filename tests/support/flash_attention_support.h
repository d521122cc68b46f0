// flash_attention_support.h: what the fused-attention suites share
// (tests/kernels/cpu/test_cpu_flash_attention.cpp,
// tests/cuda/cuda_test_flash_attention.cpp): random inputs in the heads
// layout [bh, T, hs], a run of the fused ops on any Backend with every
// output poisoned first, a run of the explicit FP16 path (the q k^T
// batched GEMM, causal_softmax_*_lowp, the P v GEMM, as
// causal_self_attention.cpp calls them), an independent double-precision
// reference of causal attention and its gradients, and the error measure.
//
// Tolerance against the double reference, per tensor X with M = max |X_ref|:
//   |got - ref| <= kFp16RelTol * |ref| + 2^-10 * M   (2 FP16 ulps + a floor)
// in FP16; in BF16 both terms 8x (its ulp: lowp_format.h).
// The fused path rounds once per output, after FP32 sums over at most T
// terms; the floor covers outputs that are sums with cancellation (the
// gradients), whose FP32 error scales with the terms' size, not the sum's.
// The backward is held to the reference of the op as defined, D from the
// FP16 out it is given (flash_reference's out_for_d); against the true
// gradient it must be no worse than the explicit path's error + 2^-11 * M
// + what D from the FP16 out costs (the two references' difference).
// lse (FP32 throughout): |got - ref| <= 1e-5 * (1 + |ref|).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/buffer.h"
#include "kernels/ops/causal_softmax.h"
#include "kernels/ops/flash_attention.h"
#include "kernels/ops/gemm.h"
#include "support/lowp_format.h"
#include "support/test_support.h"

namespace ddp::test {

constexpr double kFlashFloorOfMax = 1.0 / 1024.0;      // 2^-10 * M
constexpr double kFlashExplicitMargin = 1.0 / 2048.0;  // 2^-11 * M over the explicit path's error
constexpr double kFlashLseTol = 1e-5;

struct FlashShape {
  int bh = 1, T = 1, hs = 1;
  size_t elems() const { return static_cast<size_t>(bh) * T * hs; }
  size_t rows() const { return static_cast<size_t>(bh) * T; }
  float scale() const { return 1.0f / std::sqrt(static_cast<float>(hs)); }
  std::string text() const {
    return "bh=" + std::to_string(bh) + " T=" + std::to_string(T) + " hs=" + std::to_string(hs);
  }
};

struct FlashInputs {
  std::vector<lowp16> q, k, v, dout;
  LowpFormat fmt;  // the 16-bit format of the words above (and of the runs' outputs)
};

// q and k in [-2, 2] so that the scaled scores spread (at hs = 64 the
// softmax is then far from uniform); v and dout in [-1, 1].
inline FlashInputs random_flash_inputs(std::mt19937_64& rng, const FlashShape& s,
                                       const LowpFormat& fmt = LowpFormat{}) {
  return {fmt.random(rng, s.elems(), -2.0f, 2.0f), fmt.random(rng, s.elems(), -2.0f, 2.0f), fmt.random(rng, s.elems()),
          fmt.random(rng, s.elems()), fmt};
}

// The forward's and the backward's outputs, downloaded (as double for the
// comparisons; the raw halves for bitwise ones).
struct FlashOutputs {
  std::vector<lowp16> out, dq, dk, dv;
  std::vector<float> lse;
};

struct FlashDevice {
  Buffer<lowp16> q, k, v, dout;
  FlashDevice(Backend& be, const FlashInputs& in, const FlashShape& s)
      : q(be, s.elems()), k(be, s.elems()), v(be, s.elems()), dout(be, s.elems()) {
    q.upload(in.q);
    k.upload(in.k);
    v.upload(in.v);
    dout.upload(in.dout);
  }
};

// The fused forward alone: out and lse, poisoned (NaN) first.
inline void run_fused_forward(Backend& be, const FlashInputs& in, const FlashShape& s, FlashOutputs& got) {
  FlashDevice x(be, in, s);
  Buffer<lowp16> out(be, s.elems());
  Buffer<float> lse(be, s.rows());
  out.upload(LowpFormat::poison(s.elems()));
  lse.upload(std::vector<float>(s.rows(), std::numeric_limits<float>::quiet_NaN()));
  AttentionForwardFused forward;
  forward.q = x.q.data();
  forward.k = x.k.data();
  forward.v = x.v.data();
  forward.batch_heads = s.bh;
  forward.seq_len = s.T;
  forward.head_size = s.hs;
  forward.scale = s.scale();
  forward.out = out.data();
  forward.lse = lse.data();
  attention_forward_fused_lowp(be, forward);
  be.synchronize();
  got.out = out.download();
  got.lse = lse.download();
}

// The fused backward alone, from the given out and lse (so two backends'
// backwards can be compared on the same inputs): dq, dk, dv, poisoned first.
inline void run_fused_backward(Backend& be, const FlashInputs& in, const FlashShape& s, const std::vector<lowp16>& out,
                               const std::vector<float>& lse, FlashOutputs& got) {
  FlashDevice x(be, in, s);
  Buffer<lowp16> d_out(be, s.elems());
  Buffer<float> lse_in(be, s.rows());
  d_out.upload(out);
  lse_in.upload(lse);
  Buffer<lowp16> dq(be, s.elems()), dk(be, s.elems()), dv(be, s.elems());
  for (Buffer<lowp16>* b : {&dq, &dk, &dv}) b->upload(LowpFormat::poison(s.elems()));
  AttentionBackwardFused backward;
  backward.q = x.q.data();
  backward.k = x.k.data();
  backward.v = x.v.data();
  backward.out = d_out.data();
  backward.lse = lse_in.data();
  backward.dout = x.dout.data();
  backward.batch_heads = s.bh;
  backward.seq_len = s.T;
  backward.head_size = s.hs;
  backward.scale = s.scale();
  backward.dq = dq.data();
  backward.dk = dk.data();
  backward.dv = dv.data();
  attention_backward_fused_lowp(be, backward);
  be.synchronize();
  got.dq = dq.download();
  got.dk = dk.download();
  got.dv = dv.download();
}

// The fused forward, then the fused backward from its own out and lse.
inline FlashOutputs run_fused(Backend& be, const FlashInputs& in, const FlashShape& s) {
  FlashOutputs got;
  run_fused_forward(be, in, s, got);
  run_fused_backward(be, in, s, got.out, got.lse, got);
  return got;
}

inline GemmLowp flash_gemm(Transpose ta, Transpose tb, int m, int n, int k, const lowp16* a, int lda, const lowp16* b,
                           int ldb, lowp16* c, int ldc) {
  GemmLowp g;
  g.trans_a = ta;
  g.trans_b = tb;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = a;
  g.lda = lda;
  g.b = b;
  g.ldb = ldb;
  g.c = c;
  g.ldc = ldc;
  return g;
}

// The explicit FP16 path, as causal_self_attention.cpp runs it: scores =
// fp16(q k^T), P = causal_softmax_forward (scale inside), out = fp16(P v);
// dP = fp16(dout v^T), dv = fp16(P^T dout), dS = causal_softmax_backward
// (scale inside), dq = fp16(dS k), dk = fp16(dS^T q). lse is left empty.
inline FlashOutputs run_explicit(Backend& be, const FlashInputs& in, const FlashShape& s) {
  const int T = s.T, hs = s.hs, z = s.bh;
  const int64_t th = static_cast<int64_t>(T) * hs, tt = static_cast<int64_t>(T) * T;
  const size_t tt_all = static_cast<size_t>(z) * T * T;
  Buffer<lowp16> q(be, s.elems()), k(be, s.elems()), v(be, s.elems()), dout(be, s.elems());
  q.upload(in.q);
  k.upload(in.k);
  v.upload(in.v);
  dout.upload(in.dout);
  Buffer<lowp16> probs(be, tt_all), d_scores(be, tt_all);
  Buffer<lowp16> out(be, s.elems()), dq(be, s.elems()), dk(be, s.elems()), dv(be, s.elems());
  for (Buffer<lowp16>* b : {&out, &dq, &dk, &dv}) b->upload(LowpFormat::poison(s.elems()));
  const Transpose N = Transpose::No, Y = Transpose::Yes;
  GemmBatchedLowp scores_gemm;
  scores_gemm.gemm = flash_gemm(N, Y, T, T, hs, q.data(), hs, k.data(), hs, probs.data(), T);
  scores_gemm.batch_count = z;
  scores_gemm.stride_a = th;
  scores_gemm.stride_b = th;
  scores_gemm.stride_c = tt;
  gemm_batched_lowp(be, scores_gemm);
  CausalSoftmaxForward softmax;
  softmax.scores = probs.data();
  softmax.batch_heads = z;
  softmax.seq_len = T;
  softmax.scale = s.scale();
  softmax.probs = probs.data();
  causal_softmax_forward_lowp(be, softmax);
  GemmBatchedLowp out_gemm;
  out_gemm.gemm = flash_gemm(N, N, T, hs, T, probs.data(), T, v.data(), hs, out.data(), hs);
  out_gemm.batch_count = z;
  out_gemm.stride_a = tt;
  out_gemm.stride_b = th;
  out_gemm.stride_c = th;
  gemm_batched_lowp(be, out_gemm);
  GemmBatchedLowp d_probs_gemm;
  d_probs_gemm.gemm = flash_gemm(N, Y, T, T, hs, dout.data(), hs, v.data(), hs, d_scores.data(), T);
  d_probs_gemm.batch_count = z;
  d_probs_gemm.stride_a = th;
  d_probs_gemm.stride_b = th;
  d_probs_gemm.stride_c = tt;
  gemm_batched_lowp(be, d_probs_gemm);
  GemmBatchedLowp dv_gemm;
  dv_gemm.gemm = flash_gemm(Y, N, T, hs, T, probs.data(), T, dout.data(), hs, dv.data(), hs);
  dv_gemm.batch_count = z;
  dv_gemm.stride_a = tt;
  dv_gemm.stride_b = th;
  dv_gemm.stride_c = th;
  gemm_batched_lowp(be, dv_gemm);
  CausalSoftmaxBackward softmax_grad;
  softmax_grad.probs = probs.data();
  softmax_grad.dprobs = d_scores.data();
  softmax_grad.batch_heads = z;
  softmax_grad.seq_len = T;
  softmax_grad.scale = s.scale();
  softmax_grad.dscores = d_scores.data();
  causal_softmax_backward_lowp(be, softmax_grad);
  GemmBatchedLowp dq_gemm;
  dq_gemm.gemm = flash_gemm(N, N, T, hs, T, d_scores.data(), T, k.data(), hs, dq.data(), hs);
  dq_gemm.batch_count = z;
  dq_gemm.stride_a = tt;
  dq_gemm.stride_b = th;
  dq_gemm.stride_c = th;
  gemm_batched_lowp(be, dq_gemm);
  GemmBatchedLowp dk_gemm;
  dk_gemm.gemm = flash_gemm(Y, N, T, hs, T, d_scores.data(), T, q.data(), hs, dk.data(), hs);
  dk_gemm.batch_count = z;
  dk_gemm.stride_a = tt;
  dk_gemm.stride_b = th;
  dk_gemm.stride_c = th;
  gemm_batched_lowp(be, dk_gemm);
  be.synchronize();
  return {out.download(), dq.download(), dk.download(), dv.download(), {}};
}

// Causal attention and its gradients in double from the FP16 inputs, head
// by head, written from the formulas (softmax with the max subtracted,
// dS = P (dP - D), no tiles, no online rescaling). D_i = rowsum(P dP) =
// dout_i . out_i with the exact out: the true gradient. With out_for_d, D_i
// = dout_i . out_for_d_i instead: the backward op's own definition, whose
// out argument is the forward's FP16 output (its rounding, up to 2^-12
// |out|, moves D and so dq_i by up to scale |dD_i| sum_j p_ij |k_j|: at
// head size 1 that alone can exceed the allowance against the true
// gradient, for the explicit path as well).
//
// dq_floor and dk_floor bound, per element, what FP32 can make of the
// cancellation in dS = P (dP - D): dP_j and D are two FP32 sums of hs
// products each, equal in exact arithmetic where softmax's gradient
// vanishes (T = 1: one key, dS = 0), each within hs 2^-24 of the sum of
// its |products|; that gap, times P_j and scale |k_j| (dq) or |q_i| (dk).
// With a zero reference (M = 0) the relative allowance is 0, so without
// this floor any rounding at all would fail (seen at T = 1, head size 64,
// with OpenBLAS 0.3.21 on AMD EPYC).
struct FlashReference {
  std::vector<double> out, lse, dq, dk, dv;
  std::vector<double> dq_floor, dk_floor;
};

inline FlashReference flash_reference(const FlashInputs& in, const FlashShape& s,
                                      const std::vector<lowp16>* out_for_d = nullptr) {
  const size_t T = static_cast<size_t>(s.T), hs = static_cast<size_t>(s.hs);
  const double scale = s.scale();
  FlashReference r{std::vector<double>(s.elems()), std::vector<double>(s.rows()),  std::vector<double>(s.elems()),
                   std::vector<double>(s.elems()), std::vector<double>(s.elems()), std::vector<double>(s.elems()),
                   std::vector<double>(s.elems())};
  const double fp32_dot = static_cast<double>(hs) * std::ldexp(1.0, -24);  // an FP32 dot's bound per |product|
  const LowpFormat& fmt = in.fmt;
  const auto q = fmt.widened_doubles(in.q), k = fmt.widened_doubles(in.k), v = fmt.widened_doubles(in.v),
             dout = fmt.widened_doubles(in.dout);
  std::vector<double> p(T), dp(T), dp_abs(T);
  for (size_t z = 0; z < static_cast<size_t>(s.bh); ++z) {
    const size_t h = z * T * hs;
    for (size_t i = 0; i < T; ++i) {
      double max_s = -std::numeric_limits<double>::infinity();
      for (size_t j = 0; j <= i; ++j) {
        double dot = 0;
        for (size_t d = 0; d < hs; ++d) dot += q[h + i * hs + d] * k[h + j * hs + d];
        p[j] = scale * dot;
        max_s = std::max(max_s, p[j]);
      }
      double sum = 0;
      for (size_t j = 0; j <= i; ++j) sum += (p[j] = std::exp(p[j] - max_s));
      r.lse[z * T + i] = max_s + std::log(sum);
      for (size_t j = 0; j <= i; ++j) p[j] /= sum;
      for (size_t d = 0; d < hs; ++d) {
        double o = 0;
        for (size_t j = 0; j <= i; ++j) o += p[j] * v[h + j * hs + d];
        r.out[h + i * hs + d] = o;
      }
      // Backward of row i: dP_j = dout_i . v_j, dS_j = P_j (dP_j - sum P dP).
      double pdp = 0;
      for (size_t j = 0; j <= i; ++j) {
        double dot = 0, dot_abs = 0;
        for (size_t d = 0; d < hs; ++d) {
          dot += dout[h + i * hs + d] * v[h + j * hs + d];
          dot_abs += std::fabs(dout[h + i * hs + d] * v[h + j * hs + d]);
        }
        dp[j] = dot;
        dp_abs[j] = dot_abs;
        pdp += p[j] * dot;
      }
      double pdp_abs = 0;  // D as the op sums it: dout_i . out_i
      for (size_t d = 0; d < hs; ++d) {
        const double o = out_for_d ? fmt.widen((*out_for_d)[h + i * hs + d]) : r.out[h + i * hs + d];
        pdp_abs += std::fabs(dout[h + i * hs + d] * o);
      }
      if (out_for_d) {
        pdp = 0;
        for (size_t d = 0; d < hs; ++d) pdp += dout[h + i * hs + d] * fmt.widen((*out_for_d)[h + i * hs + d]);
      }
      for (size_t j = 0; j <= i; ++j) {
        const double ds = p[j] * (dp[j] - pdp);
        const double ds_floor = p[j] * fp32_dot * (dp_abs[j] + pdp_abs);
        for (size_t d = 0; d < hs; ++d) {
          r.dq[h + i * hs + d] += scale * ds * k[h + j * hs + d];
          r.dk[h + j * hs + d] += scale * ds * q[h + i * hs + d];
          r.dv[h + j * hs + d] += p[j] * dout[h + i * hs + d];
          r.dq_floor[h + i * hs + d] += scale * ds_floor * std::fabs(k[h + j * hs + d]);
          r.dk_floor[h + j * hs + d] += scale * ds_floor * std::fabs(q[h + i * hs + d]);
        }
      }
    }
  }
  return r;
}

// How far one tensor is from the reference: the largest absolute error,
// and the largest error as a fraction of the allowance kFp16RelTol * |ref|
// + kFlashFloorOfMax * M (<= 1 passes). NaN counts as infinitely far.
struct FlashError {
  double max_abs = 0, max_ref = 0, worst_fraction = 0;
  size_t worst_index = 0;
};

inline double flash_value(float x, const LowpFormat&) { return x; }
inline double flash_value(double x, const LowpFormat&) { return x; }
inline double flash_value(lowp16 x, const LowpFormat& fmt) { return fmt.widen(x); }

// floor (optional, per element): added to the allowance (FlashReference's
// cancellation floors). `fmt`: the format of lowp16 values and the
// tolerance's (kFp16RelTol and 2^-10 M for FP16; 8x both for BF16).
template <class T>
FlashError flash_error(const std::vector<T>& got, const std::vector<double>& ref,
                       const std::vector<double>* floor = nullptr, const LowpFormat& fmt = LowpFormat{}) {
  const double scale = fmt.rel_tol() / kFp16RelTol;
  FlashError e;
  for (double x : ref) e.max_ref = std::max(e.max_ref, std::fabs(x));
  for (size_t i = 0; i < ref.size(); ++i) {
    const double g = flash_value(got[i], fmt);
    const double abs_err = std::isnan(g) ? std::numeric_limits<double>::infinity() : std::fabs(g - ref[i]);
    const double allowance =
        fmt.rel_tol() * std::fabs(ref[i]) + scale * kFlashFloorOfMax * e.max_ref + (floor ? (*floor)[i] : 0.0);
    const double fraction = allowance > 0 ? abs_err / allowance : (abs_err > 0 ? INFINITY : 0.0);
    e.max_abs = std::max(e.max_abs, abs_err);
    if (fraction > e.worst_fraction || std::isnan(fraction)) {
      e.worst_fraction = fraction;
      e.worst_index = i;
    }
  }
  return e;
}

inline std::string flash_error_text(const char* what, const FlashError& e) {
  return std::string(what) + ": max abs err " + std::to_string(e.max_abs) + " (M " + std::to_string(e.max_ref) +
         "), worst " + std::to_string(e.worst_fraction) + " of the allowance at " + std::to_string(e.worst_index);
}

inline std::vector<uint32_t> float_bits(const std::vector<float>& x) {
  std::vector<uint32_t> bits(x.size());
  for (size_t i = 0; i < x.size(); ++i) bits[i] = bits_of(x[i]);
  return bits;
}
inline std::vector<uint16_t> half_bits(const std::vector<lowp16>& x) {
  std::vector<uint16_t> bits(x.size());
  for (size_t i = 0; i < x.size(); ++i) bits[i] = x[i].bits;
  return bits;
}

}  // namespace ddp::test
