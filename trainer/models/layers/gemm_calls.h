// gemm_calls.h: the GEMMs layers call, by the layout of their operands, so
// a call reads as its formula (row-major, FP16 operands and result, FP32
// sums; backend.h's GemmFp16 carries the rest): the returned descriptor
// goes to gemm_fp16 or, with the per-matrix strides, gemm_batched_fp16.
// Epilogues (bias, activations, bias gradients) are set on it by the caller.
#pragma once

#include "kernels/gemm_ops.h"

namespace ddp {

// C [m, n] = A [m, k] B [n, k]^T
inline GemmFp16 gemm_nt(int m, int n, int k, const half16* a, int lda, const half16* b, int ldb, half16* c, int ldc) {
  GemmFp16 g;
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
inline GemmFp16 gemm_nn(int m, int n, int k, const half16* a, int lda, const half16* b, int ldb, half16* c, int ldc) {
  GemmFp16 g = gemm_nt(m, n, k, a, lda, b, ldb, c, ldc);
  g.trans_b = Transpose::No;
  return g;
}

// C [m, n] = A [k, m]^T B [k, n]
inline GemmFp16 gemm_tn(int m, int n, int k, const half16* a, int lda, const half16* b, int ldb, half16* c, int ldc) {
  GemmFp16 g = gemm_nn(m, n, k, a, lda, b, ldb, c, ldc);
  g.trans_a = Transpose::Yes;
  return g;
}

}  // namespace ddp
