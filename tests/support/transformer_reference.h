// transformer_reference.h (tests): double-precision references of the GPT's
// Backend operations (backend.h, "transformer operations"), computed from
// the same FP16 inputs the kernels read, for test_cpu_transformer_kernels.cpp
// and test_cpu_attention_kernels.cpp. Each is the textbook formula in
// double; the backward references are themselves checked against central
// finite differences of the forward ones in those suites.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/half.h"

namespace ddp::test {

struct LayerNormReference {
  std::vector<double> y, mean, rstd;
};

// x [rows, cols] (as doubles), gamma/beta [cols]: nn.LayerNorm in double.
inline LayerNormReference layernorm_reference(const std::vector<double>& x, const std::vector<double>& gamma,
                                              const std::vector<double>& beta, int rows, int cols, double eps) {
  LayerNormReference r;
  r.y.resize(x.size());
  r.mean.resize(rows);
  r.rstd.resize(rows);
  for (int i = 0; i < rows; ++i) {
    const double* row = x.data() + static_cast<size_t>(i) * cols;
    double m = 0, v = 0;
    for (int c = 0; c < cols; ++c) m += row[c];
    m /= cols;
    for (int c = 0; c < cols; ++c) v += (row[c] - m) * (row[c] - m);
    v /= cols;
    const double rs = 1.0 / std::sqrt(v + eps);
    r.mean[i] = m;
    r.rstd[i] = rs;
    for (int c = 0; c < cols; ++c) r.y[static_cast<size_t>(i) * cols + c] = (row[c] - m) * rs * gamma[c] + beta[c];
  }
  return r;
}

struct LayerNormGradReference {
  std::vector<double> dx, dgamma, dbeta;
  std::vector<double> dx_magnitude;                       // per element: the scale of the terms that cancel in dx
  std::vector<double> dgamma_magnitude, dbeta_magnitude;  // per column: sum |terms|
};

inline LayerNormGradReference layernorm_grad_reference(const std::vector<double>& dy, const std::vector<double>& x,
                                                       const std::vector<double>& gamma, int rows, int cols,
                                                       double eps) {
  const std::vector<double> zeros(cols, 0.0);
  const LayerNormReference f = layernorm_reference(x, gamma, zeros, rows, cols, eps);
  LayerNormGradReference r;
  r.dx.resize(x.size());
  r.dx_magnitude.resize(x.size());
  r.dgamma.assign(cols, 0.0);
  r.dbeta.assign(cols, 0.0);
  r.dgamma_magnitude.assign(cols, 0.0);
  r.dbeta_magnitude.assign(cols, 0.0);
  for (int i = 0; i < rows; ++i) {
    double mean_g = 0, mean_gx = 0, abs_g = 0, abs_gx = 0;
    for (int c = 0; c < cols; ++c) {
      const size_t at = static_cast<size_t>(i) * cols + c;
      const double xhat = (x[at] - f.mean[i]) * f.rstd[i], g = dy[at] * gamma[c];
      mean_g += g;
      mean_gx += g * xhat;
      abs_g += std::fabs(g);
      abs_gx += std::fabs(g * xhat);
      r.dgamma[c] += dy[at] * xhat;
      r.dbeta[c] += dy[at];
      r.dgamma_magnitude[c] += std::fabs(dy[at] * xhat);
      r.dbeta_magnitude[c] += std::fabs(dy[at]);
    }
    mean_g /= cols;
    mean_gx /= cols;
    abs_g /= cols;
    abs_gx /= cols;
    for (int c = 0; c < cols; ++c) {
      const size_t at = static_cast<size_t>(i) * cols + c;
      const double xhat = (x[at] - f.mean[i]) * f.rstd[i], g = dy[at] * gamma[c];
      r.dx[at] = f.rstd[i] * (g - mean_g - xhat * mean_gx);
      r.dx_magnitude[at] = f.rstd[i] * (std::fabs(g) + abs_g + std::fabs(xhat) * abs_gx);
    }
  }
  return r;
}

// Causal softmax of one [T, T] score matrix in double: p[i, j] for j <= i.
inline std::vector<double> causal_softmax_reference(const std::vector<double>& s, int seq_len, double scale) {
  std::vector<double> p(s.size(), 0.0);
  for (int i = 0; i < seq_len; ++i) {
    double max_v = -INFINITY, sum = 0;
    for (int j = 0; j <= i; ++j) max_v = std::max(max_v, scale * s[static_cast<size_t>(i) * seq_len + j]);
    for (int j = 0; j <= i; ++j) sum += std::exp(scale * s[static_cast<size_t>(i) * seq_len + j] - max_v);
    for (int j = 0; j <= i; ++j)
      p[static_cast<size_t>(i) * seq_len + j] = std::exp(scale * s[static_cast<size_t>(i) * seq_len + j] - max_v) / sum;
  }
  return p;
}

// ds = scale * p * (dp - sum_j p dp) for one [T, T] matrix, from p and dp;
// magnitude: the scale of the terms that cancel.
inline void causal_softmax_grad_reference(const std::vector<double>& p, const std::vector<double>& dp, int seq_len,
                                          double scale, std::vector<double>& ds, std::vector<double>& magnitude) {
  ds.assign(p.size(), 0.0);
  magnitude.assign(p.size(), 0.0);
  for (int i = 0; i < seq_len; ++i) {
    double dot = 0, abs_dot = 0;
    for (int j = 0; j <= i; ++j) {
      const size_t at = static_cast<size_t>(i) * seq_len + j;
      dot += p[at] * dp[at];
      abs_dot += std::fabs(p[at] * dp[at]);
    }
    for (int j = 0; j <= i; ++j) {
      const size_t at = static_cast<size_t>(i) * seq_len + j;
      ds[at] = scale * p[at] * (dp[at] - dot);
      magnitude[at] = std::fabs(scale * p[at]) * (std::fabs(dp[at]) + abs_dot);
    }
  }
}

}  // namespace ddp::test
