// gemm_calls.h: the GEMMs layers call, by the layout of their operands, so
// a call reads as its formula (row-major, FP16 operands and result, FP32
// sums; backend.h's GemmLowp carries the rest): the returned descriptor
// goes to gemm_lowp or, with the per-matrix strides, gemm_batched_lowp.
// Epilogues (bias, activations, bias gradients) are set on it by the caller.
#pragma once

#include "kernels/ops/gemm.h"

namespace ddp {

// C [m, n] = A [m, k] B [n, k]^T
inline GemmLowp gemm_nt(int m, int n, int k, const lowp16* a, int lda, const lowp16* b, int ldb, lowp16* c, int ldc) {
  GemmLowp g;
  g.trans_b = Transpose::Yes;
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

// C [m, n] = A [m, k] B [k, n]
inline GemmLowp gemm_nn(int m, int n, int k, const lowp16* a, int lda, const lowp16* b, int ldb, lowp16* c, int ldc) {
  GemmLowp g = gemm_nt(m, n, k, a, lda, b, ldb, c, ldc);
  g.trans_b = Transpose::No;
  return g;
}

// C [m, n] = A [k, m]^T B [k, n]
inline GemmLowp gemm_tn(int m, int n, int k, const lowp16* a, int lda, const lowp16* b, int ldb, lowp16* c, int ldc) {
  GemmLowp g = gemm_nn(m, n, k, a, lda, b, ldb, c, ldc);
  g.trans_a = Transpose::Yes;
  return g;
}

}  // namespace ddp
