// cpu_transformer.cpp: the GPT's operations on the CPU (cpu_transformer.h).
// Rows are widened to FP32 a row at a time (half_convert.h: F16C where the
// CPU has it), computed with the shared math of transformer_math.h, and
// rounded once. Column sums (LayerNorm's dgamma/dbeta, the embeddings'
// gradients) are split by columns or by tokens, so each sum runs over the
// rows in increasing order on one thread whatever the thread count.
#include "kernels/cpu/cpu_transformer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_lowp_simd.h"
#include "kernels/cpu/cpu_softmax_rows.h"
#include "kernels/error.h"
#include "kernels/cpu/cpu_elementwise.h"  // widen_lowp, narrow_fp32
#include "kernels/half_convert.h"
#include "kernels/transformer_math.h"

namespace ddp::cpu {
namespace {

size_t count_of(int n) { return n > 0 ? static_cast<size_t>(n) : 0; }

// Row-wise pass: fn(r0, r1) over [0, rows), split when rows * width is large.
template <class Fn>
void for_rows(CpuThreadPool& pool, size_t rows, size_t width, Fn&& fn) {
  pool.parallel_for(rows, 1, cpu_pass_pieces(rows * width, pool.size()), fn);
}

#if DDP_X86
template <class C>
DDP_AVX_F16C void add_avx(const lowp16* a, const lowp16* b, lowp16* y, size_t count) {
  size_t i = 0;
  for (; i + 8 <= count; i += 8) store8(C{}, y + i, _mm256_add_ps(load8(C{}, a + i), load8(C{}, b + i)));
  for (; i < count; ++i) y[i] = C::narrow(C::widen(a[i]) + C::widen(b[i]));
}
#endif

void add_range(Precision p, const lowp16* a, const lowp16* b, lowp16* y, size_t count) {
  with_codec(p, [&](auto codec) {
    using C = decltype(codec);
#if DDP_X86
    if (f16c_available()) return add_avx<C>(a, b, y, count);
#endif
    for (size_t i = 0; i < count; ++i) y[i] = C::narrow(C::widen(a[i]) + C::widen(b[i]));
  });
}

}  // namespace

void add(Precision p, CpuThreadPool& pool, const lowp16* a, const lowp16* b, lowp16* y, size_t count) {
  // An FP32 add rounds the same in a vector lane as in scalar code.
  pool.parallel_for(count, 64, cpu_pass_pieces(count, pool.size()),
                    [&](size_t i0, size_t i1) { add_range(p, a + i0, b + i0, y + i0, i1 - i0); });
}

void embedding_forward(Precision p, CpuThreadPool& pool, const int32_t* tokens, const lowp16* wte, const lowp16* wpe,
                       int batch, int seq_len, int channels, int vocab, lowp16* out) {
  DDP_REQUIRE(batch >= 0 && seq_len >= 0 && channels >= 0 && vocab >= 0, "embedding_forward_lowp: negative shape");
  const size_t rows = count_of(batch) * count_of(seq_len), width = count_of(channels);
  for_rows(pool, rows, width, [&](size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; ++r) {
      const int32_t token = tokens[r];
      const lowp16* pos = wpe + (r % count_of(seq_len)) * width;
      lowp16* dst = out + r * width;
      if (token < 0 || token >= vocab) {
        std::fill(dst, dst + width,
                  with_codec(p, [](auto codec) { return codec.narrow(std::numeric_limits<float>::quiet_NaN()); }));
        continue;
      }
      add_range(p, wte + static_cast<size_t>(token) * width, pos, dst, width);
    }
  });
}

void embedding_backward(Precision p, CpuThreadPool& pool, TransformerScratch& s, const int32_t* tokens,
                        const lowp16* dout, int batch, int seq_len, int channels, int vocab, lowp16* d_wte,
                        lowp16* d_wpe, bool accumulate) {
  DDP_REQUIRE(batch >= 0 && seq_len >= 0 && channels >= 0 && vocab >= 0, "embedding_backward_lowp: negative shape");
  const size_t rows = count_of(batch) * count_of(seq_len), width = count_of(channels), table = count_of(vocab);
  // A stable counting sort of the rows by token: each token's rows in
  // increasing order, so its sum runs in the order a sequential loop over
  // the rows would add them (and CUDA's stable radix sort gives the same).
  s.token_start.assign(table + 1, 0);
  for (size_t r = 0; r < rows; ++r)
    if (tokens[r] >= 0 && tokens[r] < vocab) ++s.token_start[static_cast<size_t>(tokens[r]) + 1];
  for (size_t v = 0; v < table; ++v) s.token_start[v + 1] += s.token_start[v];
  s.row_order.resize(static_cast<size_t>(s.token_start[table]));
  {
    std::vector<int32_t> next(s.token_start.begin(), s.token_start.end() - 1);
    for (size_t r = 0; r < rows; ++r)
      if (tokens[r] >= 0 && tokens[r] < vocab)
        s.row_order[static_cast<size_t>(next[tokens[r]]++)] = static_cast<int32_t>(r);
  }
  // d_wte by token ranges: each row of the table is one thread's.
  pool.parallel_for(table, 1, cpu_pass_pieces(rows * width + table * width, pool.size()), [&](size_t v0, size_t v1) {
    std::vector<float> sum(width), row(width);
    for (size_t v = v0; v < v1; ++v) {
      lowp16* dst = d_wte + v * width;
      const int32_t begin = s.token_start[v], end = s.token_start[v + 1];
      if (begin == end && accumulate) continue;  // nothing to add
      if (accumulate)
        widen_lowp(p, dst, sum.data(), width);
      else
        std::fill(sum.begin(), sum.end(), 0.0f);
      for (int32_t i = begin; i < end; ++i) {
        widen_lowp(p, dout + static_cast<size_t>(s.row_order[static_cast<size_t>(i)]) * width, row.data(), width);
        for (size_t c = 0; c < width; ++c) sum[c] += row[c];
      }
      narrow_fp32(p, sum.data(), dst, width);
    }
  });
  // d_wpe by positions: sum over the batch in increasing b.
  const size_t positions = count_of(seq_len);
  for_rows(pool, positions, width * count_of(batch), [&](size_t t0, size_t t1) {
    std::vector<float> sum(width), row(width);
    for (size_t t = t0; t < t1; ++t) {
      lowp16* dst = d_wpe + t * width;
      if (accumulate)
        widen_lowp(p, dst, sum.data(), width);
      else
        std::fill(sum.begin(), sum.end(), 0.0f);
      for (size_t b = 0; b < count_of(batch); ++b) {
        widen_lowp(p, dout + (b * positions + t) * width, row.data(), width);
        for (size_t c = 0; c < width; ++c) sum[c] += row[c];
      }
      narrow_fp32(p, sum.data(), dst, width);
    }
  });
}

void layernorm_forward(Precision p, CpuThreadPool& pool, const lowp16* x, const lowp16* gamma, const lowp16* beta,
                       int rows, int cols, float eps, lowp16* y, float* mean, float* rstd) {
  DDP_REQUIRE(rows >= 0 && cols > 0, "layernorm_forward_lowp: needs cols > 0");
  const size_t width = count_of(cols);
  std::vector<float> gamma32(width), beta32(width);
  widen_lowp(p, gamma, gamma32.data(), width);
  widen_lowp(p, beta, beta32.data(), width);
  for_rows(pool, count_of(rows), width, [&](size_t r0, size_t r1) {
    std::vector<float> row(width), out(width);
    for (size_t r = r0; r < r1; ++r) {
      widen_lowp(p, x + r * width, row.data(), width);
      float sum = 0.0f;
      for (size_t c = 0; c < width; ++c) sum += row[c];
      const float m = sum / static_cast<float>(width);
      float sq = 0.0f;
      for (size_t c = 0; c < width; ++c) sq += (row[c] - m) * (row[c] - m);
      const float rs = layernorm_rstd(sq / static_cast<float>(width), eps);
      for (size_t c = 0; c < width; ++c)
        out[c] = layernorm_output(layernorm_xhat(row[c], m, rs), gamma32[c], beta32[c]);
      narrow_fp32(p, out.data(), y + r * width, width);
      mean[r] = m;
      rstd[r] = rs;
    }
  });
}

void layernorm_backward(Precision p, CpuThreadPool& pool, const lowp16* dy, const lowp16* x, const lowp16* gamma,
                        const float* mean, const float* rstd, int rows, int cols, lowp16* dx, bool accumulate_dx,
                        lowp16* dgamma, lowp16* dbeta, bool accumulate_params) {
  DDP_REQUIRE(rows >= 0 && cols > 0, "layernorm_backward_lowp: needs cols > 0");
  const size_t width = count_of(cols), height = count_of(rows);
  std::vector<float> gamma32(width);
  widen_lowp(p, gamma, gamma32.data(), width);
  // The parameter sums first: dx may overwrite nothing they read, but a
  // caller may pass dx == dy (the gradient in place), so read dy before.
  pool.parallel_for(width, 16, cpu_pass_pieces(height * width, pool.size()), [&](size_t c0, size_t c1) {
    with_codec(p, [&](auto codec) {
      using C = decltype(codec);
      for (size_t c = c0; c < c1; ++c) {
        float sum_gx = 0.0f, sum_g = 0.0f;
        for (size_t r = 0; r < height; ++r) {
          const float d = C::widen(dy[r * width + c]);
          sum_gx += d * layernorm_xhat(C::widen(x[r * width + c]), mean[r], rstd[r]);
          sum_g += d;
        }
        dgamma[c] = C::narrow(sum_gx + (accumulate_params ? C::widen(dgamma[c]) : 0.0f));
        dbeta[c] = C::narrow(sum_g + (accumulate_params ? C::widen(dbeta[c]) : 0.0f));
      }
    });
  });
  for_rows(pool, height, width, [&](size_t r0, size_t r1) {
    std::vector<float> xhat(width), g(width), out(width);
    for (size_t r = r0; r < r1; ++r) {
      widen_lowp(p, x + r * width, xhat.data(), width);
      widen_lowp(p, dy + r * width, g.data(), width);
      float sum_g = 0.0f, sum_gx = 0.0f;
      for (size_t c = 0; c < width; ++c) {
        xhat[c] = layernorm_xhat(xhat[c], mean[r], rstd[r]);
        g[c] *= gamma32[c];
        sum_g += g[c];
        sum_gx += g[c] * xhat[c];
      }
      const float mean_g = sum_g / static_cast<float>(width), mean_gx = sum_gx / static_cast<float>(width);
      if (accumulate_dx) widen_lowp(p, dx + r * width, out.data(), width);
      for (size_t c = 0; c < width; ++c) {
        const float d = layernorm_dx(g[c], xhat[c], mean_g, mean_gx, rstd[r]);
        out[c] = accumulate_dx ? out[c] + d : d;
      }
      narrow_fp32(p, out.data(), dx + r * width, width);
    }
  });
}

void causal_softmax_forward(Precision p, CpuThreadPool& pool, const lowp16* scores, int batch_heads, int seq_len,
                            float scale, lowp16* probs) {
  DDP_REQUIRE(batch_heads >= 0 && seq_len >= 0, "causal_softmax_forward_lowp: negative shape");
  const size_t t_count = count_of(seq_len), rows = count_of(batch_heads) * t_count;
  for_rows(pool, rows, t_count, [&](size_t r0, size_t r1) {
    std::vector<float> v(t_count);
    for (size_t r = r0; r < r1; ++r) {
      const size_t i = r % t_count, visible = i + 1;
      widen_lowp(p, scores + r * t_count, v.data(), visible);
      float max_v = -std::numeric_limits<float>::infinity();
      for (size_t j = 0; j < visible; ++j) max_v = std::max(max_v, v[j] = scale * v[j]);
      const float sum = exp_shifted_sum(v.data(), max_v, v.data(), visible);
      const float inv_sum = 1.0f / sum;
      for (size_t j = 0; j < visible; ++j) v[j] *= inv_sum;
      std::fill(v.begin() + static_cast<std::ptrdiff_t>(visible), v.end(), 0.0f);  // masked: exactly 0
      narrow_fp32(p, v.data(), probs + r * t_count, t_count);
    }
  });
}

void causal_softmax_backward(Precision p, CpuThreadPool& pool, const lowp16* probs, const lowp16* dprobs,
                             int batch_heads, int seq_len, float scale, lowp16* dscores) {
  DDP_REQUIRE(batch_heads >= 0 && seq_len >= 0, "causal_softmax_backward_lowp: negative shape");
  const size_t t_count = count_of(seq_len), rows = count_of(batch_heads) * t_count;
  for_rows(pool, rows, t_count, [&](size_t r0, size_t r1) {
    std::vector<float> prob(t_count), dp(t_count);
    for (size_t r = r0; r < r1; ++r) {
      const size_t i = r % t_count, visible = i + 1;
      widen_lowp(p, probs + r * t_count, prob.data(), visible);
      widen_lowp(p, dprobs + r * t_count, dp.data(), visible);
      float dot = 0.0f;
      for (size_t j = 0; j < visible; ++j) dot += prob[j] * dp[j];
      for (size_t j = 0; j < visible; ++j) prob[j] = causal_softmax_grad(prob[j], dp[j], dot, scale);
      std::fill(prob.begin() + static_cast<std::ptrdiff_t>(visible), prob.end(), 0.0f);
      narrow_fp32(p, prob.data(), dscores + r * t_count, t_count);
    }
  });
}

void rows_to_heads(CpuThreadPool& pool, const lowp16* rows, int row_stride, int batch, int seq_len, int heads,
                   int head_size, lowp16* heads_out) {
  DDP_REQUIRE(batch >= 0 && seq_len >= 0 && heads >= 0 && head_size >= 0 && row_stride >= heads * head_size,
              "rows_to_heads_lowp: bad shape");
  const size_t t_count = count_of(seq_len), hs = count_of(head_size), nh = count_of(heads);
  // One output row (b, h, t) per index, in output order.
  for_rows(pool, count_of(batch) * nh * t_count, hs, [&](size_t o0, size_t o1) {
    for (size_t o = o0; o < o1; ++o) {
      const size_t t = o % t_count, h = (o / t_count) % nh, b = o / (t_count * nh);
      std::memcpy(heads_out + o * hs, rows + (b * t_count + t) * count_of(row_stride) + h * hs, hs * sizeof(lowp16));
    }
  });
}

void heads_to_rows(CpuThreadPool& pool, const lowp16* heads_in, int batch, int seq_len, int heads, int head_size,
                   lowp16* rows, int row_stride) {
  DDP_REQUIRE(batch >= 0 && seq_len >= 0 && heads >= 0 && head_size >= 0 && row_stride >= heads * head_size,
              "heads_to_rows_lowp: bad shape");
  const size_t t_count = count_of(seq_len), hs = count_of(head_size), nh = count_of(heads);
  for_rows(pool, count_of(batch) * nh * t_count, hs, [&](size_t o0, size_t o1) {
    for (size_t o = o0; o < o1; ++o) {
      const size_t t = o % t_count, h = (o / t_count) % nh, b = o / (t_count * nh);
      std::memcpy(rows + (b * t_count + t) * count_of(row_stride) + h * hs, heads_in + o * hs, hs * sizeof(lowp16));
    }
  });
}

void attention_decode(Precision p, CpuThreadPool& pool, const lowp16* q, int q_stride, const lowp16* k_cache,
                      const lowp16* v_cache, int kv_stride, int heads, int head_size, int past_len, int new_len,
                      float scale, lowp16* out, int out_stride) {
  DDP_REQUIRE(heads >= 0 && head_size >= 0 && past_len >= 0 && new_len >= 0 && q_stride >= heads * head_size &&
                  kv_stride >= heads * head_size && out_stride >= heads * head_size,
              "attention_decode_lowp: bad shape");
  const size_t nh = count_of(heads), hs = count_of(head_size), past = count_of(past_len);
  const size_t kv_ld = count_of(kv_stride);
  // One (query, head) pair per index; its sums run on one thread.
  for_rows(pool, count_of(new_len) * nh, (past + count_of(new_len)) * hs, [&](size_t o0, size_t o1) {
    with_codec(p, [&](auto codec) {
      using C = decltype(codec);
      // x rounded to the working precision and widened back: what a GEMM's
      // 16-bit output holds.
      const auto rounded = [](float x) { return C::widen(C::narrow(x)); };
      std::vector<float> q32(hs), row32(hs), out32(hs);
      std::vector<float> v(past + count_of(new_len));
      for (size_t o = o0; o < o1; ++o) {
        const size_t i = o / nh, h = o % nh, visible = past + i + 1;
        widen_lowp(p, q + i * count_of(q_stride) + h * hs, q32.data(), hs);
        // Scores rounded to the working precision, as the full path's q k^T GEMM writes them.
        // Each dot is an FMA chain in increasing d: the order and the fused
        // steps of OpenBLAS's SGEMM kernels on FMA CPUs, so the FP32 sums
        // usually match the GEMM's bit for bit.
        for (size_t j = 0; j < visible; ++j) {
          widen_lowp(p, k_cache + j * kv_ld + h * hs, row32.data(), hs);
          float dot = 0.0f;
          for (size_t d = 0; d < hs; ++d) dot = std::fma(q32[d], row32[d], dot);
          v[j] = rounded(dot);
        }
        // The causal softmax's row, as causal_softmax_forward computes it.
        float max_v = -std::numeric_limits<float>::infinity();
        for (size_t j = 0; j < visible; ++j) max_v = std::max(max_v, v[j] = scale * v[j]);
        const float inv_sum = 1.0f / exp_shifted_sum(v.data(), max_v, v.data(), visible);
        for (size_t j = 0; j < visible; ++j) v[j] = rounded(v[j] * inv_sum);
        // P v, an FMA chain over increasing j per output (the masked
        // positions of the full path add exact zeros to its chain).
        std::fill(out32.begin(), out32.end(), 0.0f);
        for (size_t j = 0; j < visible; ++j) {
          widen_lowp(p, v_cache + j * kv_ld + h * hs, row32.data(), hs);
          for (size_t d = 0; d < hs; ++d) out32[d] = std::fma(v[j], row32[d], out32[d]);
        }
        narrow_fp32(p, out32.data(), out + i * count_of(out_stride) + h * hs, hs);
      }
    });
  });
}

}  // namespace ddp::cpu
