// gpt_reference_ops.h: the layers of GPT-2 in double precision, each forward
// with its hand-written backward, as plain loops (no BLAS, no FP16) so that a
// reader can check every line against the formula beside it. The model that
// strings them together is gpt_reference.h; these exist only as its parts.
//
// Layout: activations are row-major [rows, features] with rows = B*T
// (row b*T + t is sample b, position t); weights are nn.Linear [out, in].
// A backward returns the input's gradient and ACCUMULATES (+=) into the
// parameter gradients, so a tied tensor (wte) can collect two contributions.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ddp::test::gpt_ref {

using Vec = std::vector<double>;

// ---- Linear: y[n, o] = b[o] + sum_i x[n, i] w[o, i] (b may be null: the tied LM head has none).
inline Vec linear_forward(const Vec& x, const Vec& w, const Vec* b, size_t rows, size_t in, size_t out) {
  Vec y(rows * out, 0.0);
  for (size_t n = 0; n < rows; ++n)
    for (size_t o = 0; o < out; ++o) {
      double sum = b ? (*b)[o] : 0.0;
      for (size_t i = 0; i < in; ++i) sum += x[n * in + i] * w[o * in + i];
      y[n * out + o] = sum;
    }
  return y;
}

// dx = dy w; dw += dy^T x; db += sum over rows of dy.
inline Vec linear_backward(const Vec& dy, const Vec& x, const Vec& w, size_t rows, size_t in, size_t out, Vec& dw,
                           Vec* db) {
  Vec dx(rows * in, 0.0);
  for (size_t n = 0; n < rows; ++n)
    for (size_t o = 0; o < out; ++o) {
      const double g = dy[n * out + o];
      if (db) (*db)[o] += g;
      for (size_t i = 0; i < in; ++i) {
        dx[n * in + i] += g * w[o * in + i];
        dw[o * in + i] += g * x[n * in + i];
      }
    }
  return dx;
}

// ---- LayerNorm over the last dimension (biased variance, eps inside the root, as torch).
constexpr double kLayerNormEps = 1e-5;

struct LayerNormCache {
  Vec x_hat;  // [rows, C] normalised input
  Vec rstd;   // [rows] 1 / sqrt(var + eps)
};

inline Vec layernorm_forward(const Vec& x, const Vec& gain, const Vec& bias, size_t rows, size_t C,
                             LayerNormCache& cache) {
  Vec y(rows * C);
  cache.x_hat.assign(rows * C, 0.0);
  cache.rstd.assign(rows, 0.0);
  for (size_t n = 0; n < rows; ++n) {
    double mean = 0, var = 0;
    for (size_t c = 0; c < C; ++c) mean += x[n * C + c];
    mean /= static_cast<double>(C);
    for (size_t c = 0; c < C; ++c) var += (x[n * C + c] - mean) * (x[n * C + c] - mean);
    var /= static_cast<double>(C);
    const double rstd = 1.0 / std::sqrt(var + kLayerNormEps);
    cache.rstd[n] = rstd;
    for (size_t c = 0; c < C; ++c) {
      const double xh = (x[n * C + c] - mean) * rstd;
      cache.x_hat[n * C + c] = xh;
      y[n * C + c] = xh * gain[c] + bias[c];
    }
  }
  return y;
}

// With g = dy * gain: dx = rstd * (g - mean(g) - x_hat * mean(g * x_hat)), the
// usual result of differentiating through the mean and the variance.
inline Vec layernorm_backward(const Vec& dy, const Vec& gain, const LayerNormCache& cache, size_t rows, size_t C,
                              Vec& dgain, Vec& dbias) {
  Vec dx(rows * C);
  for (size_t n = 0; n < rows; ++n) {
    double mean_g = 0, mean_gx = 0;
    for (size_t c = 0; c < C; ++c) {
      const double g = dy[n * C + c] * gain[c];
      mean_g += g;
      mean_gx += g * cache.x_hat[n * C + c];
      dgain[c] += dy[n * C + c] * cache.x_hat[n * C + c];
      dbias[c] += dy[n * C + c];
    }
    mean_g /= static_cast<double>(C);
    mean_gx /= static_cast<double>(C);
    for (size_t c = 0; c < C; ++c) {
      const double g = dy[n * C + c] * gain[c];
      dx[n * C + c] = cache.rstd[n] * (g - mean_g - cache.x_hat[n * C + c] * mean_gx);
    }
  }
  return dx;
}

// ---- GELU, tanh form (torch approximate='tanh', GPT-2):
// gelu(x) = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3).
inline double gelu_tanh(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}
// d/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) du/dx, du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2).
inline double gelu_tanh_grad(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  const double t = std::tanh(k * (x + 0.044715 * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * 0.044715 * x * x);
}

// ---- Causal multi-head self-attention on the fused qkv [B*T, 3C]: q is
// columns 0..C-1, k C..2C-1, v 2C..3C-1, head h columns h*hs..(h+1)*hs-1 of
// each. out[b, i, head h] = sum_{j <= i} p_ij v_j, p_i = softmax_j(q_i.k_j / sqrt(hs)).
struct AttentionCache {
  Vec probs;  // [B, nh, T, T]; zero above the diagonal
};

struct AttentionShape {
  size_t batch, seq, channels, heads;
  size_t head_size() const { return channels / heads; }
  size_t q(size_t b, size_t t, size_t h) const { return (b * seq + t) * 3 * channels + h * head_size(); }
  size_t k(size_t b, size_t t, size_t h) const { return q(b, t, h) + channels; }
  size_t v(size_t b, size_t t, size_t h) const { return q(b, t, h) + 2 * channels; }
  size_t out(size_t b, size_t t, size_t h) const { return (b * seq + t) * channels + h * head_size(); }
  size_t prob(size_t b, size_t h, size_t i, size_t j) const { return ((b * heads + h) * seq + i) * seq + j; }
};

inline Vec attention_forward(const Vec& qkv, const AttentionShape& s, AttentionCache& cache) {
  const size_t hs = s.head_size();
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  Vec out(s.batch * s.seq * s.channels, 0.0);
  cache.probs.assign(s.batch * s.heads * s.seq * s.seq, 0.0);
  Vec score(s.seq);
  for (size_t b = 0; b < s.batch; ++b)
    for (size_t h = 0; h < s.heads; ++h)
      for (size_t i = 0; i < s.seq; ++i) {
        double max_score = -INFINITY;
        for (size_t j = 0; j <= i; ++j) {  // the causal mask: keys after the query are never read
          double dot = 0;
          for (size_t d = 0; d < hs; ++d) dot += qkv[s.q(b, i, h) + d] * qkv[s.k(b, j, h) + d];
          score[j] = dot * scale;
          max_score = std::max(max_score, score[j]);
        }
        double sum = 0;
        for (size_t j = 0; j <= i; ++j) sum += std::exp(score[j] - max_score);
        for (size_t j = 0; j <= i; ++j) {
          const double p = std::exp(score[j] - max_score) / sum;
          cache.probs[s.prob(b, h, i, j)] = p;
          for (size_t d = 0; d < hs; ++d) out[s.out(b, i, h) + d] += p * qkv[s.v(b, j, h) + d];
        }
      }
  return out;
}

// dp_ij = dout_i . v_j;  dv_j += p_ij dout_i;
// dscore_ij = p_ij (dp_ij - sum_k p_ik dp_ik)  (softmax backward);
// dq_i += scale dscore_ij k_j;  dk_j += scale dscore_ij q_i.
inline Vec attention_backward(const Vec& dout, const Vec& qkv, const AttentionShape& s, const AttentionCache& cache) {
  const size_t hs = s.head_size();
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  Vec dqkv(qkv.size(), 0.0);
  Vec dp(s.seq);
  for (size_t b = 0; b < s.batch; ++b)
    for (size_t h = 0; h < s.heads; ++h)
      for (size_t i = 0; i < s.seq; ++i) {
        double weighted = 0;  // sum_j p_ij dp_ij
        for (size_t j = 0; j <= i; ++j) {
          const double p = cache.probs[s.prob(b, h, i, j)];
          double dot = 0;
          for (size_t d = 0; d < hs; ++d) {
            dot += dout[s.out(b, i, h) + d] * qkv[s.v(b, j, h) + d];
            dqkv[s.v(b, j, h) + d] += p * dout[s.out(b, i, h) + d];
          }
          dp[j] = dot;
          weighted += p * dot;
        }
        for (size_t j = 0; j <= i; ++j) {
          const double dscore = cache.probs[s.prob(b, h, i, j)] * (dp[j] - weighted) * scale;
          for (size_t d = 0; d < hs; ++d) {
            dqkv[s.q(b, i, h) + d] += dscore * qkv[s.k(b, j, h) + d];
            dqkv[s.k(b, j, h) + d] += dscore * qkv[s.q(b, i, h) + d];
          }
        }
      }
  return dqkv;
}

// ---- Cross-entropy over the first `classes` of `padded` logit columns, mean
// over rows. The padded columns take no part: not in the softmax, gradient 0
// ("padded classes never win"). dlogits (if given) gets (p - onehot) / rows.
inline double cross_entropy(const Vec& logits, const std::vector<int32_t>& targets, size_t rows, size_t padded,
                            size_t classes, Vec* dlogits) {
  if (dlogits) dlogits->assign(rows * padded, 0.0);
  double total = 0;
  for (size_t n = 0; n < rows; ++n) {
    const double* z = &logits[n * padded];
    const double max_z = *std::max_element(z, z + classes);
    double sum = 0;
    for (size_t c = 0; c < classes; ++c) sum += std::exp(z[c] - max_z);
    const double log_sum = max_z + std::log(sum);
    const size_t target = static_cast<size_t>(targets[n]);
    total += log_sum - z[target];
    if (dlogits) {
      for (size_t c = 0; c < classes; ++c)
        (*dlogits)[n * padded + c] = (std::exp(z[c] - log_sum) - (c == target ? 1.0 : 0.0)) / static_cast<double>(rows);
    }
  }
  return total / static_cast<double>(rows);
}

}  // namespace ddp::test::gpt_ref
