// cuda_gemm_simple.cu: the fallback GEMM (cuda_gemm.h): one thread per
// output element, FP32 fused multiply-adds of exactly widened 16-bit operands,
// then alpha, beta*C and the whole epilogue (gemm_epilogue_element: bias,
// activation or its gradient, pre-activation output) in FP32 and one
// rounding to 16 bits. The bias gradient of A is launch_bias_grad_op_a_lowp's,
// queued by the caller. It exists for layouts or alignments cuBLASLt has no
// algorithm for, and for k == 0; speed is not its concern.
#include "kernels/cuda/cuda_gemm.h"

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_launch.cuh"
#include "kernels/gemm_epilogue.h"

namespace ddp {
namespace {

constexpr unsigned kTileCols = 32, kTileRows = 8;
constexpr unsigned kMaxGridY = 65535;  // gridDim.y limit

template <class C>
__global__ void simple_gemm_kernel(GemmLowp g) {
  const bool a_t = g.trans_a == Transpose::Yes, b_t = g.trans_b == Transpose::Yes;
  for (int i = static_cast<int>(blockIdx.y * blockDim.y + threadIdx.y); i < g.m;
       i += static_cast<int>(gridDim.y * blockDim.y)) {
    for (int j = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x); j < g.n;
         j += static_cast<int>(gridDim.x * blockDim.x)) {
      float acc = 0.0f;
      for (int p = 0; p < g.k; ++p) {
        // Stored A is m x k (k x m when transposed), B is k x n (n x k).
        const lowp16 a = a_t ? g.a[static_cast<size_t>(p) * g.lda + i] : g.a[static_cast<size_t>(i) * g.lda + p];
        const lowp16 b = b_t ? g.b[static_cast<size_t>(j) * g.ldb + p] : g.b[static_cast<size_t>(p) * g.ldb + j];
        acc = fmaf(C::widen(a), C::widen(b), acc);
      }
      lowp16* c = g.c + static_cast<size_t>(i) * g.ldc + j;
      float out = g.alpha * acc;
      // beta == 0 never reads C (it may hold garbage), as in BLAS.
      if (g.beta != 0.0f) out += g.beta * C::widen(*c);
      *c = gemm_epilogue_element<C>(g, i, j, out);  // bias, activation or its gradient, pre-activation
    }
  }
}

}  // namespace

void launch_simple_gemm_lowp(Precision p, const GemmLowp& g, cudaStream_t stream) {
  if (g.m <= 0 || g.n <= 0) return;
  const dim3 block(kTileCols, kTileRows);
  const unsigned grid_x = static_cast<unsigned>((g.n + kTileCols - 1) / kTileCols);
  unsigned grid_y = static_cast<unsigned>((g.m + kTileRows - 1) / kTileRows);
  if (grid_y > kMaxGridY) grid_y = kMaxGridY;  // the kernel strides over the rest
  with_codec(p, [&](auto codec) {
    using C = decltype(codec);
    launch_kernel<simple_gemm_kernel<C>>({dim3(grid_x, grid_y), block, 0, stream}, g);
  });
  DDP_CUDA_CHECK_LAUNCH();
}

}  // namespace ddp
