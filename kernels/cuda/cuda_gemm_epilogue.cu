// cuda_gemm_epilogue.cu: the parts of a GemmLowp epilogue (backend.h) that
// cuBLASLt cannot do with our semantics, as kernels of their own:
// - ReLU's gradient applied in place to the rounded GEMM result, which gives
//   the same bits as applying it before the rounding (relu' is 0 or 1), at
//   the memory traffic of the separate pass it replaces;
// - the element-wise epilogue applied to an FP32 GEMM result, for GELU
//   (cuBLASLt's GELU epilogues use the tanh approximation, the MLP's GELU is
//   the erf form; the GPT's GeluTanh takes this route too, see
//   cuda_gemm.h), GELU's gradient and the pre-activation output: one
//   gemm_epilogue_element per output, the function the CPU backend uses, so
//   there is still one rounding to 16 bits and both backends agree;
// - the bias gradient of op(A) where cuBLASLt's BGRADB cannot take it
//   (accumulating, alpha != 1, a misaligned output, a fallback path): the
//   column-sum kernel of cuda_elementwise.cu on A's strided view, which
//   spreads each sum over 16 row lanes (an output per thread summing all k
//   rows gave 4 blocks for 1024 outputs, on every accumulating micro-batch).
//   FP32 sums in another order than the CPU's: equal to the tolerance of an
//   FP32 sum of k terms, not bitwise.
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_elementwise.h"
#include "kernels/cuda/cuda_gemm.h"
#include "kernels/gemm_epilogue.h"

namespace ddp {
namespace {

// acc: [m, n] packed, alpha * op(A) op(B) in FP32 (beta is 0 with an
// activation epilogue, validate_gemm_epilogue).
template <class C>
__global__ void gemm_epilogue_kernel(GemmLowp g, const float* acc) {
  const size_t count = static_cast<size_t>(g.m) * g.n;
  for (size_t idx = global_thread_index(); idx < count; idx += grid_stride()) {
    const int i = static_cast<int>(idx / g.n), j = static_cast<int>(idx % g.n);
    g.c[static_cast<size_t>(i) * g.ldc + j] = gemm_epilogue_element<C>(g, i, j, acc[idx]);
  }
}

// C[i, j] = relu'(Z[i, j]) * C[i, j] in place on the rounded GEMM result:
// relu' is 0 or 1, so this gives the bits of rounding relu'(z) * v once
// (z > 0 ? round(v) : +0, as relu_backward).
template <class C>
__global__ void relu_gradient_in_place_kernel(GemmLowp g) {
  const size_t count = static_cast<size_t>(g.m) * g.n;
  for (size_t idx = global_thread_index(); idx < count; idx += grid_stride()) {
    const size_t i = idx / g.n, j = idx % g.n;
    lowp16& c = g.c[i * g.ldc + j];
    c = C::narrow(relu_backward(C::widen(g.dact_input[i * g.ld_dact_input + j]), C::widen(c)));
  }
}

}  // namespace

void launch_gemm_epilogue_lowp(Precision p, const GemmLowp& g, const float* acc_fp32, cudaStream_t stream) {
  const size_t count = static_cast<size_t>(g.m) * g.n;
  if (count == 0) return;
  with_codec(p, [&](auto codec) {
    using C = decltype(codec);
    launch_kernel<gemm_epilogue_kernel<C>>({grid_for(count), kThreadsPerBlock, 0, stream}, g, acc_fp32);
  });
  DDP_CUDA_CHECK_LAUNCH();
}

void launch_relu_gradient_in_place_lowp(Precision p, const GemmLowp& g, cudaStream_t stream) {
  const size_t count = static_cast<size_t>(g.m) * g.n;
  if (count == 0) return;
  with_codec(p, [&](auto codec) {
    using C = decltype(codec);
    launch_kernel<relu_gradient_in_place_kernel<C>>({grid_for(count), kThreadsPerBlock, 0, stream}, g);
  });
  DDP_CUDA_CHECK_LAUNCH();
}

void launch_bias_grad_op_a_lowp(Precision p, const GemmLowp& g, cudaStream_t stream) {
  if (g.m <= 0 || g.bias_grad == nullptr) return;
  // bias_grad[i] = sum_p op(A)[i, p]: column sums over k rows and m columns.
  // Transposed A (the weight-gradient GEMM, dW = dZ^T X) is stored [k, m]
  // with row stride lda: coalesced. Plain A is stored [m, k]: element
  // (p, i) at i * lda + p, strided reads, but no training GEMM asks that.
  const bool a_t = g.trans_a == Transpose::Yes;
  launch_column_sums_lowp(stream, p, g.a, g.k, g.m, a_t ? static_cast<size_t>(g.lda) : 1,
                          a_t ? 1 : static_cast<size_t>(g.lda), g.bias_grad, g.bias_grad_accumulate);
}

}  // namespace ddp
