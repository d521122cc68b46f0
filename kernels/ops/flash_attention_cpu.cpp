// flash_attention_cpu.cpp: the CPU rows of the fused causal attention
// (flash_attention.h): tiles widened to FP32, tile products by
// cblas_sgemm, the online softmax and the FlashAttention-2 backward in FP32,
// one rounding to FP16 per output.
//
// The work is cut into (batch_head, tile) items of kTile query rows
// (forward, the backward's dq pass) or key rows (the backward's dk/dv pass);
// each item owns its output rows and visits its tile pairs in increasing
// tile order, so an item's bits are the same whichever thread of
// CpuBackend's pool takes it: the results do not depend on the thread
// count. Tile products are cblas_sgemm calls on FP32 copies of the tiles
// (the FP16 inputs widen exactly), single-threaded inside the pool's
// threads, and always of the same shape for the same tile pair.
#include "kernels/ops/flash_attention.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_blas_single_threaded.h"
#include "kernels/cpu/cpu_elementwise.h"  // widen_lowp, narrow_fp32
#include "kernels/cpu/cpu_softmax_rows.h"
#include "kernels/cpu/cpu_thread_pool.h"
#include "kernels/error.h"

namespace ddp {

namespace {

// Query rows and key rows per tile: a 64 x 64 FP32 score tile is 16 KB, and
// with the 64-row operand tiles and the item's accumulators it stays in L2
// at the GPT's head sizes. Not tuned beyond that.
constexpr size_t kTile = 64;

size_t tiles_of(size_t n) { return (n + kTile - 1) / kTile; }

void check_shape(const char* op, int batch_heads, int seq_len, int head_size) {
  DDP_REQUIRE(batch_heads >= 0 && seq_len >= 0, std::string(op) + ": negative shape");
  DDP_REQUIRE(head_size >= 1, std::string(op) + ": head_size must be >= 1");
}

// Calls item(index, scratch) for every index in [0, count) on the pool's
// threads, each thread with one Scratch of its own, taking indices from a
// shared counter. Which thread runs an index never changes its result: an
// item writes only its own outputs.
template <class Scratch, class Item>
void for_items(CpuThreadPool& pool, size_t count, size_t head_size, Item&& item) {
  std::atomic<size_t> next{0};
  pool.run_shared([&] {
    Scratch s(head_size);
    for (size_t index; (index = next.fetch_add(1)) < count;) item(index, s);
  });
}

// The tile rows [row0, row0 + rows) of one head, widened: [rows, hs] FP32.
void widen_tile(Precision p, const lowp16* head, size_t row0, size_t rows, size_t hs, float* dst) {
  cpu::widen_lowp(p, head + row0 * hs, dst, rows * hs);
}

// Keys visible to tile row r of the pair (query tile qt, key tile kt):
// tiles of both kinds start at the same multiples of kTile, so a tile below
// the diagonal is all visible and the diagonal tile is lower triangular.
size_t visible_keys(size_t qt, size_t kt, size_t r, size_t cols) { return kt < qt ? cols : std::min(r + 1, cols); }

// c[rows, kTile] = a[rows, hs] b[cols, hs]^T: the score-shaped products
// (q k^T, dout v^T), FP32 sums of exact products.
void gemm_abt(size_t rows, size_t cols, size_t hs, const float* a, const float* b, float* c) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(rows), static_cast<int>(cols),
              static_cast<int>(hs), 1.0f, a, static_cast<int>(hs), b, static_cast<int>(hs), 0.0f, c,
              static_cast<int>(kTile));
}

// acc[rows, hs] += p[rows, inner (ld kTile)] x[inner, hs]: P v, dS k.
void gemm_acc_ab(size_t rows, size_t inner, size_t hs, const float* p, const float* x, float* acc) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(rows), static_cast<int>(hs),
              static_cast<int>(inner), 1.0f, p, static_cast<int>(kTile), x, static_cast<int>(hs), 1.0f, acc,
              static_cast<int>(hs));
}

// acc[cols, hs] += p[inner, cols (ld kTile)]^T x[inner, hs]: P^T dout, dS^T q.
void gemm_acc_atb(size_t cols, size_t inner, size_t hs, const float* p, const float* x, float* acc) {
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(cols), static_cast<int>(hs),
              static_cast<int>(inner), 1.0f, p, static_cast<int>(kTile), x, static_cast<int>(hs), 1.0f, acc,
              static_cast<int>(hs));
}

// ---- forward -----------------------------------------------------------------

struct ForwardScratch {
  explicit ForwardScratch(size_t hs)
      : q(kTile * hs), k(kTile * hs), v(kTile * hs), o(kTile * hs), s(kTile * kTile), m(kTile), l(kTile) {}
  std::vector<float> q, k, v, o;  // [kTile, hs]
  std::vector<float> s;           // [kTile, kTile] scores, then probabilities
  std::vector<float> m, l;        // [kTile] running max and sum
};

// One query tile of one head: its out rows and lse entries.
void forward_item(Precision p, const lowp16* q, const lowp16* k, const lowp16* v, size_t T, size_t hs, float scale,
                  size_t qt, lowp16* out, float* lse, ForwardScratch& w) {
  const size_t i0 = qt * kTile, rows = std::min(kTile, T - i0);
  widen_tile(p, q, i0, rows, hs, w.q.data());
  std::fill(w.m.begin(), w.m.end(), -std::numeric_limits<float>::infinity());
  std::fill(w.l.begin(), w.l.end(), 0.0f);
  std::fill(w.o.begin(), w.o.end(), 0.0f);
  for (size_t kt = 0; kt <= qt; ++kt) {  // key tiles above the diagonal are all masked: never visited
    const size_t j0 = kt * kTile, cols = std::min(kTile, T - j0);
    widen_tile(p, k, j0, cols, hs, w.k.data());
    widen_tile(p, v, j0, cols, hs, w.v.data());
    gemm_abt(rows, cols, hs, w.q.data(), w.k.data(), w.s.data());
    for (size_t r = 0; r < rows; ++r) {
      float* s = w.s.data() + r * kTile;
      const size_t visible = visible_keys(qt, kt, r, cols);
      float tile_max = -std::numeric_limits<float>::infinity();
      for (size_t j = 0; j < visible; ++j) tile_max = std::max(tile_max, s[j] = scale * s[j]);
      const float m_new = std::max(w.m[r], tile_max);
      const float correction = std::exp(w.m[r] - m_new);  // e^-inf = 0 on the first tile
      const float tile_sum = cpu::exp_shifted_sum(s, m_new, s, visible);
      // Masked keys: exact zeros, so P v adds nothing for them.
      std::fill(s + visible, s + cols, 0.0f);
      w.l[r] = correction * w.l[r] + tile_sum;
      w.m[r] = m_new;
      if (correction != 1.0f)
        for (size_t d = 0; d < hs; ++d) w.o[r * hs + d] *= correction;
    }
    gemm_acc_ab(rows, cols, hs, w.s.data(), w.v.data(), w.o.data());
  }
  for (size_t r = 0; r < rows; ++r) {
    for (size_t d = 0; d < hs; ++d) w.o[r * hs + d] /= w.l[r];
    lse[i0 + r] = w.m[r] + std::log(w.l[r]);
  }
  cpu::narrow_fp32(p, w.o.data(), out + i0 * hs, rows * hs);
}

// ---- backward ----------------------------------------------------------------

struct BackwardScratch {
  explicit BackwardScratch(size_t hs)
      : q(kTile * hs),
        dout(kTile * hs),
        k(kTile * hs),
        v(kTile * hs),
        acc_a(kTile * hs),
        acc_b(kTile * hs),
        p(kTile * kTile),
        ds(kTile * kTile) {}
  std::vector<float> q, dout, k, v;  // [kTile, hs] operand tiles
  std::vector<float> acc_a, acc_b;   // [kTile, hs] the item's FP32 sums
  std::vector<float> p, ds;          // [kTile, kTile] probabilities, score gradients
};

// The pair (qt, kt) of one head, with w.q, w.dout (query tile) and w.k, w.v
// (key tile) widened: w.p = probabilities recomputed from lse, w.ds = P *
// (dout v^T - D); masked entries exactly 0 in both.
void pair_probs_and_grads(size_t qt, size_t kt, size_t rows, size_t cols, size_t hs, float scale, const float* lse,
                          const float* row_d, BackwardScratch& w) {
  gemm_abt(rows, cols, hs, w.q.data(), w.k.data(), w.p.data());
  gemm_abt(rows, cols, hs, w.dout.data(), w.v.data(), w.ds.data());
  for (size_t r = 0; r < rows; ++r) {
    float* p = w.p.data() + r * kTile;
    float* ds = w.ds.data() + r * kTile;
    const size_t visible = visible_keys(qt, kt, r, cols);
    for (size_t j = 0; j < visible; ++j) p[j] = scale * p[j];
    // e^(s - lse): lse >= the row's maximum, so every exponent is <= 0
    // (the sum it returns is not needed).
    cpu::exp_shifted_sum(p, lse[r], p, visible);
    for (size_t j = 0; j < visible; ++j) ds[j] = p[j] * (ds[j] - row_d[r]);
    std::fill(p + visible, p + cols, 0.0f);
    std::fill(ds + visible, ds + cols, 0.0f);
  }
}

// D_i = sum_d dout_i[d] * out_i[d] for every row of one head, FP32 in
// increasing d.
void row_dots(Precision p, const lowp16* dout, const lowp16* out, size_t T, size_t hs, float* row_d) {
  std::vector<float> a(hs), b(hs);
  for (size_t i = 0; i < T; ++i) {
    cpu::widen_lowp(p, dout + i * hs, a.data(), hs);
    cpu::widen_lowp(p, out + i * hs, b.data(), hs);
    float sum = 0.0f;
    for (size_t d = 0; d < hs; ++d) sum += a[d] * b[d];
    row_d[i] = sum;
  }
}

void scale_and_round(Precision p, std::vector<float>& acc, size_t count, float factor, lowp16* dst) {
  if (factor != 1.0f)
    for (size_t i = 0; i < count; ++i) acc[i] *= factor;
  cpu::narrow_fp32(p, acc.data(), dst, count);
}

}  // namespace

void attention_forward_fused_lowp_cpu(CpuBackend& cpu, const AttentionForwardFused& op) {
  const Precision p = cpu.precision();
  const lowp16* q = op.q;
  const lowp16* k = op.k;
  const lowp16* v = op.v;
  const float scale = op.scale;
  lowp16* out = op.out;
  float* lse = op.lse;
  CpuThreadPool& pool = cpu.pool();
  check_shape(op.kName, op.batch_heads, op.seq_len, op.head_size);
  const size_t T = static_cast<size_t>(op.seq_len), hs = static_cast<size_t>(op.head_size);
  const size_t tiles = tiles_of(T), items = static_cast<size_t>(op.batch_heads) * tiles;
  if (items == 0) return;
  BlasSingleThreaded blas_single;
  for_items<ForwardScratch>(pool, items, hs, [&](size_t index, ForwardScratch& w) {
    // The longest rows (the last query tiles) first, so no long item is
    // left for the end.
    const size_t z = index / tiles, qt = tiles - 1 - index % tiles;
    const size_t head = z * T * hs;
    forward_item(p, q + head, k + head, v + head, T, hs, scale, qt, out + head, lse + z * T, w);
  });
}

void attention_backward_fused_lowp_cpu(CpuBackend& cpu, const AttentionBackwardFused& op) {
  const Precision p = cpu.precision();
  const lowp16* q = op.q;
  const lowp16* k = op.k;
  const lowp16* v = op.v;
  const lowp16* out = op.out;
  const float* lse = op.lse;
  const lowp16* dout = op.dout;
  const float scale = op.scale;
  lowp16* dq = op.dq;
  lowp16* dk = op.dk;
  lowp16* dv = op.dv;
  CpuThreadPool& pool = cpu.pool();
  check_shape(op.kName, op.batch_heads, op.seq_len, op.head_size);
  const size_t T = static_cast<size_t>(op.seq_len), hs = static_cast<size_t>(op.head_size);
  const size_t bh = static_cast<size_t>(op.batch_heads), tiles = tiles_of(T), items = bh * tiles;
  if (items == 0) return;
  BlasSingleThreaded blas_single;
  // D [bh, T] FP32, one head per item.
  std::vector<float> d_rows(bh * T);
  pool.parallel_for(bh, 1, cpu_pass_pieces(bh * T * hs, pool.size()), [&](size_t z0, size_t z1) {
    for (size_t z = z0; z < z1; ++z) row_dots(p, dout + z * T * hs, out + z * T * hs, T, hs, d_rows.data() + z * T);
  });

  // Pass 1: dk, dv per key tile, summed over the query tiles at or below
  // the diagonal in increasing order. acc_a = dv, acc_b = dk / scale.
  for_items<BackwardScratch>(pool, items, hs, [&](size_t index, BackwardScratch& w) {
    const size_t z = index / tiles, kt = index % tiles;  // the first key tiles see the most query tiles
    const size_t head = z * T * hs, j0 = kt * kTile, cols = std::min(kTile, T - j0);
    widen_tile(p, k + head, j0, cols, hs, w.k.data());
    widen_tile(p, v + head, j0, cols, hs, w.v.data());
    std::fill(w.acc_a.begin(), w.acc_a.end(), 0.0f);
    std::fill(w.acc_b.begin(), w.acc_b.end(), 0.0f);
    for (size_t qt = kt; qt < tiles; ++qt) {
      const size_t i0 = qt * kTile, rows = std::min(kTile, T - i0);
      widen_tile(p, q + head, i0, rows, hs, w.q.data());
      widen_tile(p, dout + head, i0, rows, hs, w.dout.data());
      pair_probs_and_grads(qt, kt, rows, cols, hs, scale, lse + z * T + i0, d_rows.data() + z * T + i0, w);
      gemm_acc_atb(cols, rows, hs, w.p.data(), w.dout.data(), w.acc_a.data());
      gemm_acc_atb(cols, rows, hs, w.ds.data(), w.q.data(), w.acc_b.data());
    }
    scale_and_round(p, w.acc_a, cols * hs, 1.0f, dv + head + j0 * hs);
    scale_and_round(p, w.acc_b, cols * hs, scale, dk + head + j0 * hs);
  });

  // Pass 2: dq per query tile, summed over the key tiles at or left of the
  // diagonal in increasing order (the probabilities recomputed once more:
  // the price of owning every output without atomics). acc_a = dq / scale.
  for_items<BackwardScratch>(pool, items, hs, [&](size_t index, BackwardScratch& w) {
    const size_t z = index / tiles, qt = tiles - 1 - index % tiles;
    const size_t head = z * T * hs, i0 = qt * kTile, rows = std::min(kTile, T - i0);
    widen_tile(p, q + head, i0, rows, hs, w.q.data());
    widen_tile(p, dout + head, i0, rows, hs, w.dout.data());
    std::fill(w.acc_a.begin(), w.acc_a.end(), 0.0f);
    for (size_t kt = 0; kt <= qt; ++kt) {
      const size_t j0 = kt * kTile, cols = std::min(kTile, T - j0);
      widen_tile(p, k + head, j0, cols, hs, w.k.data());
      widen_tile(p, v + head, j0, cols, hs, w.v.data());
      pair_probs_and_grads(qt, kt, rows, cols, hs, scale, lse + z * T + i0, d_rows.data() + z * T + i0, w);
      gemm_acc_ab(rows, cols, hs, w.ds.data(), w.k.data(), w.acc_a.data());
    }
    scale_and_round(p, w.acc_a, rows * hs, scale, dq + head + i0 * hs);
  });
}

}  // namespace ddp
