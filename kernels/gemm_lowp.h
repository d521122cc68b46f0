// gemm_lowp.h: what one GEMM of the gemm ops (ops/gemm.h) computes: 16-bit
// operands and result in the backend's precision (FP16 in the comments
// below; BF16 alike), FP32 accumulation, one rounding, with the epilogues
// the models fuse into it (gemm_epilogue.h). Plain data below the ops, so
// the CPU's BLAS loops (cpu/cpu_gemm.h) and cuBLASLt's plans
// (cuda/cuda_gemm.h) take it without including an op.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/elementwise_math.h"
#include "kernels/half.h"

namespace ddp {

enum class Transpose { No, Yes };

// C[m,n] = epilogue(alpha * op(A)[m,k] * op(B)[k,n] + beta * C), row-major,
// FP16 operands and result, FP32 accumulation, one rounding to FP16 at the
// end. lda/ldb/ldc are row strides of the stored matrices (stored A is m x k
// when trans_a == No, k x m when Yes).
//
// The epilogue works on the FP32 value v of each element before that one
// rounding, in this order (gemm_epilogue.h has it as code, shared by
// the CPU loops and the CUDA kernels):
//   v += bias[j]                         (bias; v already holds beta * C)
//   pre_activation[i,j] = fp16(v)        (pre_activation)
//   v = act'(z[i,j]) * v, z = dact_input (dact)
//   v = act(v)                           (act)
//   C[i,j] = fp16(v)
// and, independent of C, bias_grad[i] = fp16(sum_p op(A)[i,p]) over k in
// FP32: in the weight-gradient GEMM dW = dY^T X, op(A) = dY^T and that is
// db = sum_rows(dY), fused into the pass that already reads dY. Which of
// these each backend fuses into the GEMM itself, and which it runs as a
// kernel of its own with the same semantics: cpu_gemm.h, cuda_gemm.h.
//
// Rounding consequences against the unfused sequence (GEMM, then the
// element-wise passes of tests/support/unfused_ops.h): ReLU commutes with round-to-nearest-even
// (rounding is monotone and keeps the sign; relu'(z) is 0 or 1), so fused
// ReLU and its gradient give the same bits as the separate passes. GELU
// rounds once instead of twice: at least as accurate, not bitwise equal.
// The bias gradient sums the same FP16 values (op(A)) as the unfused
// column-sum pass.
struct GemmLowp {
  static constexpr const char* kName = "gemm_lowp";
  Transpose trans_a = Transpose::No;
  Transpose trans_b = Transpose::No;
  int m = 0, n = 0, k = 0;
  float alpha = 1.0f;
  float beta = 0.0f;
  const lowp16* a = nullptr;
  int lda = 0;
  const lowp16* b = nullptr;
  int ldb = 0;
  lowp16* c = nullptr;
  int ldc = 0;
  // Optional [n] bias added in FP32 before the rounding (a cuBLASLt epilogue
  // on CUDA), after beta * C: with beta 1 and C the residual stream, x +=
  // y W^T + b is one GEMM with one rounding (the GPT's output projections)
  // instead of a GEMM and add_lowp. Any beta.
  const lowp16* bias = nullptr;
  // Forward activation applied in FP32 before the rounding. Only with
  // beta == 0 and dact == None.
  Activation act = Activation::None;
  // Optional [m, ld_pre_activation] output: the FP16 value before act (the
  // activation's input, which GELU's gradient needs). Only with beta == 0.
  lowp16* pre_activation = nullptr;
  int ld_pre_activation = 0;
  // Backward: multiply by act'(z) before the rounding, z read from
  // dact_input [m, ld_dact_input] (FP16): the activation's input Z, or, for
  // ReLU, its output Y = fp16(relu(Z)) (Y > 0 exactly when fp16(Z) > 0, so
  // relu' is the same and no Z need be kept). Only with beta == 0. Neither
  // dact_input nor pre_activation may overlap C (CUDA may write C first).
  Activation dact = Activation::None;
  const lowp16* dact_input = nullptr;
  int ld_dact_input = 0;
  // Optional [m] bias gradient of op(A), see above; with
  // bias_grad_accumulate it is added to what bias_grad holds (before the one
  // rounding), as the unfused column-sum pass does. Any beta.
  lowp16* bias_grad = nullptr;
  bool bias_grad_accumulate = false;
};

}  // namespace ddp
