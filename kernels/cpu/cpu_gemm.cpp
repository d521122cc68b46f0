// cpu_gemm.cpp: widen, cblas_sgemm per slice, round, over the thread pool.
#include "kernels/cpu/cpu_gemm.h"

#include <cblas.h>

#include <algorithm>
#include <string>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_blas_single_threaded.h"
#include "kernels/cpu/cpu_elementwise.h"
#include "kernels/error.h"
#include "kernels/gemm_epilogue.h"

namespace ddp {
namespace {

// Below this many multiply-adds (~20 us on one core) a GEMM runs on the
// calling thread alone: waking the team would cost more than it saves.
constexpr double kMinParallelMacs = 1 << 20;
// Slice boundaries are multiples of this, so no slice ends in a partial
// register block but the last, and a row slice gives the whole product's
// bits: OpenBLAS 0.3.21's Zen kernels sum a row's products in an order that
// depends on the row's place in its call modulo 12 (16-row slices differ in
// a few percent of elements, 12- and 48-row slices never: measured), its
// AVX-512 kernels block by 16.
constexpr int kSliceGrain = 48;
// Products with at least this many rows are cut by rows only (below).
constexpr int kColumnSplitRows = 2 * kSliceGrain;
// Output slices per thread: more than one lets a thread that kept its core
// take over the work of one that lost it (on 2 shared cores, 2 per thread
// was within noise of 1 when idle, 4 per thread slower). Each slice packs
// the shared operand again, so none is narrower than kMinSliceExtent.
constexpr int kSlicesPerThread = 2;
constexpr int kMinSliceExtent = 128;

// To exactly `count` (reserve, then resize: resize alone may double the
// capacity), so the scratch the allocation tally counts is what the largest
// GEMM needs.
void grow(std::vector<float>& v, size_t count) {
  if (v.size() >= count) return;
  v.reserve(count);
  v.resize(count);
}

// gemm_lowp (out_fp32 null: the FP32 sums in scratch, rounded to g.c) or
// gemm_lowp_to_fp32 (the sums in out_fp32, row stride g.ldc, never rounded):
// the same slices and BLAS calls either way, so the two give the same sums.
void run_gemm(Precision p, const GemmLowp& g, float* out_fp32, CpuThreadPool& pool, CpuGemmScratch& s) {
  if (g.m == 0) return;
  const bool ta = g.trans_a == Transpose::Yes, tb = g.trans_b == Transpose::Yes;
  const int m = g.m, n = g.n, k = g.k;
  if (n == 0) {  // no output, but the bias gradient of A is still asked for
    if (g.bias_grad) {
      grow(s.a_fp32, static_cast<size_t>(m) * k);
      cpu::widen_rows(p, g.a, g.lda, s.a_fp32.data(), ta ? m : k, ta ? k : m, ta ? m : k);
      cpu::bias_grad_op_a(p, s.a_fp32.data(), ta ? m : k, ta, k, 0, m, g.bias_grad, g.bias_grad_accumulate);
    }
    return;
  }
  const int a_rows = ta ? k : m, a_cols = ta ? m : k;  // stored shapes
  const int b_rows = tb ? n : k, b_cols = tb ? k : n;
  grow(s.a_fp32, static_cast<size_t>(a_rows) * a_cols);
  grow(s.b_fp32, static_cast<size_t>(b_rows) * b_cols);
  if (!out_fp32) grow(s.c_fp32, static_cast<size_t>(m) * n);
  if (g.bias) grow(s.bias_fp32, static_cast<size_t>(n));
  float* a32 = s.a_fp32.data();
  float* b32 = s.b_fp32.data();
  float* c32 = out_fp32 ? out_fp32 : s.c_fp32.data();
  const int ldc32 = out_fp32 ? g.ldc : n;
  // FP16 C is widened into the scratch when beta reads it; an FP32 output
  // is read where it is.
  const bool widen_c = !out_fp32 && g.beta != 0.0f;
  const CBLAS_TRANSPOSE op_a = ta ? CblasTrans : CblasNoTrans, op_b = tb ? CblasTrans : CblasNoTrans;
  const int lda = std::max(a_cols, 1), ldb = std::max(b_cols, 1);
  cpu::NarrowEpilogue epilogue;
  epilogue.bias_fp32 = g.bias ? s.bias_fp32.data() : nullptr;
  epilogue.act = g.act;
  epilogue.pre_activation = g.pre_activation;
  epilogue.ld_pre_activation = static_cast<size_t>(g.ld_pre_activation);
  epilogue.dact = g.dact;
  epilogue.dact_input = g.dact_input;
  epilogue.ld_dact_input = static_cast<size_t>(g.ld_dact_input);
  // The bias gradient of op(A) rows lo..hi, from the widened A (row stride lda).
  const auto bias_grad_rows = [&](int lo, int hi) {
    if (g.bias_grad) cpu::bias_grad_op_a(p, a32, lda, ta, k, lo, hi, g.bias_grad, g.bias_grad_accumulate);
  };
  BlasSingleThreaded blas_single;

  const double macs = static_cast<double>(m) * n * k;
  if (pool.size() == 1 || macs < kMinParallelMacs) {
    cpu::widen_rows(p, g.a, g.lda, a32, a_cols, a_rows, a_cols);
    cpu::widen_rows(p, g.b, g.ldb, b32, b_cols, b_rows, b_cols);
    if (g.bias) cpu::widen_rows(p, g.bias, n, s.bias_fp32.data(), n, 1, n);
    if (widen_c) cpu::widen_rows(p, g.c, g.ldc, c32, n, m, n);
    if (k > 0) {
      cblas_sgemm(CblasRowMajor, op_a, op_b, m, n, k, g.alpha, a32, lda, b32, ldb, g.beta, c32, ldc32);
    } else {  // sgemm needs k >= 1: C = beta * C
      for (size_t i = 0; i < static_cast<size_t>(m); ++i)
        for (size_t j = 0; j < static_cast<size_t>(n); ++j) {
          float& v = c32[i * ldc32 + j];
          v = g.beta != 0.0f ? v * g.beta : 0.0f;
        }
    }
    if (!out_fp32) cpu::narrow_rows(p, c32, n, epilogue, g.c, g.ldc, m, n);
    bias_grad_rows(0, m);
    return;
  }

  // The output is cut into slices along m (rows), each reading all of B
  // (k x n), at multiples of kSliceGrain: a row slice gives the whole
  // product's bits (see kSliceGrain), so the bits do not depend on the
  // thread count, nor on how a caller cuts the rows (the chunked classifier,
  // tied_classifier.cpp). Column slices do not keep the bits (OpenBLAS's Zen
  // kernels: measured), so only a product of fewer than kColumnSplitRows
  // rows is cut along n (columns, each reading all of A), when n can give
  // each thread a block: its bits may depend on the thread count.
  const int threads = pool.size();
  const bool split_n = m < kColumnSplitRows && n >= threads * kSliceGrain;
  const int extent = split_n ? n : m;
  int slices = threads * kSlicesPerThread;
  while (slices > threads && extent / slices < kMinSliceExtent) --slices;
  const auto chunk_of = [&](int n) { return ((extent + n - 1) / n + kSliceGrain - 1) / kSliceGrain * kSliceGrain; };
  // Nor is any slice under kMinParallelMacs: OpenBLAS (0.3.21) computes a
  // product of at most 10^6 multiply-adds with its small-matrix kernels,
  // which sum in another order than its blocked ones, and a slice must give
  // the bits of the whole product (and of any other cut of it: a chunked
  // classifier's chunk, another thread count).
  const auto smallest_slice = [&](int n) {
    const int width = chunk_of(n);
    const int last = extent - (extent - 1) / width * width;
    return std::min(width, last);
  };
  while (slices > 1 && macs * smallest_slice(slices) / extent < kMinParallelMacs) --slices;
  const int chunk = chunk_of(slices);

  // Phase 1: the threads widen the shared operand (and C when beta != 0) by
  // stored rows.
  const lowp16* shared = split_n ? g.a : g.b;
  const int shared_ld = split_n ? g.lda : g.ldb;
  float* shared32 = split_n ? a32 : b32;
  const int shared_rows = split_n ? a_rows : b_rows, shared_cols = split_n ? a_cols : b_cols;
  if (g.bias) cpu::widen_rows(p, g.bias, n, s.bias_fp32.data(), n, 1, n);
  const size_t row_pieces = static_cast<size_t>(threads) * kSlicesPerThread;
  pool.parallel_for(shared_rows, 1, row_pieces, [&](size_t r0, size_t r1) {
    cpu::widen_rows(p, shared + r0 * shared_ld, shared_ld, shared32 + r0 * shared_cols, shared_cols, r1 - r0,
                    shared_cols);
  });
  if (widen_c)
    pool.parallel_for(m, 1, row_pieces, [&](size_t r0, size_t r1) {
      cpu::widen_rows(p, g.c + r0 * g.ldc, g.ldc, c32 + r0 * n, n, r1 - r0, n);
    });
  // A is whole now when it is the shared operand: its bias gradient, by
  // rows of op(A) (each sum runs in order on one thread).
  if (split_n && g.bias_grad)
    pool.parallel_for(m, 32, row_pieces,
                      [&](size_t i0, size_t i1) { bias_grad_rows(static_cast<int>(i0), static_cast<int>(i1)); });

  // Phase 2: the slices, each taken by whichever thread is free. A slice
  // widens its own part of the other operand, so the BLAS packs it from
  // cache, multiplies, and rounds its part of the output.
  pool.parallel_for(slices, 1, slices, [&](size_t first, size_t last) {
    for (size_t slice = first; slice < last; ++slice) {
      const int lo = std::min(extent, static_cast<int>(slice) * chunk), hi = std::min(extent, lo + chunk);
      const int width = hi - lo;
      if (width <= 0) continue;
      if (split_n) {  // B's columns lo..hi: stored rows when B is transposed, else a column block
        const size_t at = tb ? static_cast<size_t>(lo) * b_cols : static_cast<size_t>(lo);
        cpu::widen_rows(p, g.b + (tb ? static_cast<size_t>(lo) * g.ldb : at), g.ldb, b32 + at, b_cols, tb ? width : k,
                        tb ? k : width);
        cblas_sgemm(CblasRowMajor, op_a, op_b, m, width, k, g.alpha, a32, lda, b32 + at, ldb, g.beta, c32 + lo, ldc32);
        if (!out_fp32) cpu::narrow_rows(p, c32 + lo, n, epilogue.at(0, lo), g.c + lo, g.ldc, m, width);
      } else {  // A's rows lo..hi: a column block when A is transposed, else stored rows
        const size_t at = ta ? static_cast<size_t>(lo) : static_cast<size_t>(lo) * a_cols;
        cpu::widen_rows(p, g.a + (ta ? at : static_cast<size_t>(lo) * g.lda), g.lda, a32 + at, a_cols, ta ? k : width,
                        ta ? width : k);
        float* c_part = c32 + static_cast<size_t>(lo) * ldc32;
        cblas_sgemm(CblasRowMajor, op_a, op_b, width, n, k, g.alpha, a32 + at, lda, b32, ldb, g.beta, c_part, ldc32);
        if (!out_fp32)
          cpu::narrow_rows(p, c_part, n, epilogue.at(lo, 0), g.c + static_cast<size_t>(lo) * g.ldc, g.ldc, width, n);
        bias_grad_rows(lo, hi);  // op(A) rows lo..hi, just widened by this slice
      }
    }
  });
}

}  // namespace

void cpu_gemm_lowp(Precision p, const GemmLowp& g, CpuThreadPool& pool, CpuGemmScratch& scratch) {
  DDP_REQUIRE(g.m >= 0 && g.n >= 0 && g.k >= 0, "gemm_lowp: negative dimension");
  validate_gemm_epilogue(g, "m=" + std::to_string(g.m) + " n=" + std::to_string(g.n) + " k=" + std::to_string(g.k));
  run_gemm(p, g, nullptr, pool, scratch);
}

void cpu_gemm_lowp_to_fp32(Precision p, const GemmLowp& g, float* c_fp32, CpuThreadPool& pool,
                           CpuGemmScratch& scratch) {
  DDP_REQUIRE(g.m >= 0 && g.n >= 0 && g.k >= 0, "gemm_lowp_to_fp32: negative dimension");
  DDP_REQUIRE(!g.bias && !has_activation_epilogue(g) && !g.bias_grad && g.c == nullptr,
              "gemm_lowp_to_fp32: no epilogue and no FP16 C (the FP32 result is c_fp32)");
  DDP_REQUIRE(g.ldc >= std::max(1, g.n), "gemm_lowp_to_fp32: ldc smaller than a row of C");
  DDP_REQUIRE(g.m == 0 || g.n == 0 || c_fp32 != nullptr, "gemm_lowp_to_fp32: null C");
  if (g.n == 0) return;
  run_gemm(p, g, c_fp32, pool, scratch);
}

void cpu_gemm_batched_lowp(Precision p, const GemmLowp& g, int batch_count, int64_t stride_a, int64_t stride_b,
                           int64_t stride_c, CpuThreadPool& pool, std::vector<CpuGemmScratch>& scratch) {
  DDP_REQUIRE(batch_count >= 0, "gemm_batched_lowp: negative batch count");
  DDP_REQUIRE(!g.bias && !has_activation_epilogue(g) && !g.bias_grad,
              "gemm_batched_lowp: no epilogue (bias, activation, bias gradient) in a batched GEMM");
  const auto item = [&](int i) {
    GemmLowp gi = g;
    gi.a = g.a + static_cast<int64_t>(i) * stride_a;
    gi.b = g.b + static_cast<int64_t>(i) * stride_b;
    gi.c = g.c + static_cast<int64_t>(i) * stride_c;
    return gi;
  };
  const int threads = pool.size();
  if (scratch.size() < static_cast<size_t>(threads * kSlicesPerThread)) scratch.resize(threads * kSlicesPerThread);
  // Fewer products than threads: one after the other, each split over the
  // team as gemm_lowp splits it.
  if (batch_count < threads) {
    for (int i = 0; i < batch_count; ++i) cpu_gemm_lowp(p, item(i), pool, scratch[0]);
    return;
  }
  // Otherwise whole products per thread (the per-head products are small:
  // T x T x hs), each in a single-threaded BLAS call as a small gemm_lowp
  // runs, so a product's bits do not depend on the team. The pieces are
  // contiguous runs of the batch, each with its own scratch; a gemm_lowp
  // called inside a piece runs on that thread (cpu_thread_pool.h).
  BlasSingleThreaded blas_single;
  const size_t pieces = std::min<size_t>(static_cast<size_t>(batch_count), scratch.size());
  const size_t per_piece = (static_cast<size_t>(batch_count) + pieces - 1) / pieces;
  pool.parallel_for(pieces, 1, pieces, [&](size_t p0, size_t p1) {
    for (size_t piece = p0; piece < p1; ++piece) {
      const size_t first = piece * per_piece, last = std::min<size_t>(batch_count, first + per_piece);
      for (size_t i = first; i < last; ++i) cpu_gemm_lowp(p, item(static_cast<int>(i)), pool, scratch[piece]);
    }
  });
}

}  // namespace ddp
