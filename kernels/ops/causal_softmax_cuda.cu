// causal_softmax_cuda.cu: the CUDA rows of the causal softmax over
// [batch_heads, T, T] attention scores and its backward (causal_softmax.h),
// one warp per row. Row i has i + 1 visible entries; the masked ones are
// never read (a NaN or Inf there changes nothing) and are written as
// exactly +0. The scaled score scale * s is rounded to FP32 before the max
// is subtracted (__fmul_rn: no FMA contraction), as the CPU row computes
// it, so the two differ only in expf's last bits and the order of the row
// sum.
#include "kernels/ops/causal_softmax.h"

#include <cmath>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_op_context.h"
#include "kernels/error.h"
#include "kernels/transformer_math.h"

namespace ddp {
namespace {

constexpr unsigned kFullWarp = 0xffffffffu;
constexpr int kWarpsPerBlock = static_cast<int>(kThreadsPerBlock / 32);

__device__ float warp_all_max(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullWarp, v, offset));
  return v;
}

template <class C>
__global__ void causal_softmax_forward_kernel(const lowp16* scores, int rows, int seq_len, float scale, lowp16* probs) {
  const int row = static_cast<int>(blockIdx.x) * kWarpsPerBlock + static_cast<int>(threadIdx.x / 32);
  const int lane = static_cast<int>(threadIdx.x & 31u);
  if (row >= rows) return;  // uniform per warp
  const int i = row % seq_len;
  const size_t offset = static_cast<size_t>(row) * seq_len;
  float max_v = -INFINITY;
  for (int j = lane; j <= i; j += 32) max_v = fmaxf(max_v, __fmul_rn(scale, C::widen(scores[offset + j])));
  max_v = warp_all_max(max_v);
  float sum = 0.0f;
  for (int j = lane; j <= i; j += 32) sum += expf(__fmul_rn(scale, C::widen(scores[offset + j])) - max_v);
  const float inv_sum = 1.0f / warp_all_sum(sum);
  // Every lane has read all it needs of its entries: probs may equal scores
  // (each lane rewrites only the entries it read).
  for (int j = lane; j < seq_len; j += 32)
    probs[offset + j] = causal_visible(i, j)
                            ? C::narrow(expf(__fmul_rn(scale, C::widen(scores[offset + j])) - max_v) * inv_sum)
                            : lowp16{0};
}

template <class C>
__global__ void causal_softmax_backward_kernel(const lowp16* probs, const lowp16* dprobs, int rows, int seq_len,
                                               float scale, lowp16* dscores) {
  const int row = static_cast<int>(blockIdx.x) * kWarpsPerBlock + static_cast<int>(threadIdx.x / 32);
  const int lane = static_cast<int>(threadIdx.x & 31u);
  if (row >= rows) return;
  const int i = row % seq_len;
  const size_t offset = static_cast<size_t>(row) * seq_len;
  float dot = 0.0f;
  for (int j = lane; j <= i; j += 32) dot += C::widen(probs[offset + j]) * C::widen(dprobs[offset + j]);
  dot = warp_all_sum(dot);
  for (int j = lane; j < seq_len; j += 32)
    dscores[offset + j] =
        causal_visible(i, j)
            ? C::narrow(causal_softmax_grad(C::widen(probs[offset + j]), C::widen(dprobs[offset + j]), dot, scale))
            : lowp16{0};
}

unsigned row_blocks(int rows) { return blocks_for(rows, kWarpsPerBlock); }

}  // namespace

void causal_softmax_forward_lowp_cuda(CudaOpContext& cuda, const CausalSoftmaxForward& op) {
  const int batch_heads = op.batch_heads, seq_len = op.seq_len;
  DDP_REQUIRE(batch_heads >= 0 && seq_len >= 0, "causal_softmax_forward_lowp: negative shape");
  const long long rows = static_cast<long long>(batch_heads) * seq_len;
  DDP_REQUIRE(rows <= (1LL << 31) - 1, "causal_softmax_forward_lowp: too many rows");
  if (rows == 0) return;
  with_codec(cuda.precision(), [&](auto codec) {
    using C = decltype(codec);
    launch_kernel<causal_softmax_forward_kernel<C>>(
        {row_blocks(static_cast<int>(rows)), kThreadsPerBlock, 0, cuda.stream()}, op.scores, static_cast<int>(rows),
        seq_len, op.scale, op.probs);
  });
  DDP_CUDA_CHECK_LAUNCH();
}

void causal_softmax_backward_lowp_cuda(CudaOpContext& cuda, const CausalSoftmaxBackward& op) {
  const int batch_heads = op.batch_heads, seq_len = op.seq_len;
  DDP_REQUIRE(batch_heads >= 0 && seq_len >= 0, "causal_softmax_backward_lowp: negative shape");
  const long long rows = static_cast<long long>(batch_heads) * seq_len;
  DDP_REQUIRE(rows <= (1LL << 31) - 1, "causal_softmax_backward_lowp: too many rows");
  if (rows == 0) return;
  with_codec(cuda.precision(), [&](auto codec) {
    using C = decltype(codec);
    launch_kernel<causal_softmax_backward_kernel<C>>(
        {row_blocks(static_cast<int>(rows)), kThreadsPerBlock, 0, cuda.stream()}, op.probs, op.dprobs,
        static_cast<int>(rows), seq_len, op.scale, op.dscores);
  });
  DDP_CUDA_CHECK_LAUNCH();
}

}  // namespace ddp
