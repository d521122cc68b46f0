// attention_decode_cuda.cu: the CUDA row of the attention of a few new
// positions against cached keys and values (the GPT's incremental decoder;
// attention_decode.h). One warp per (new position, head), one warp per
// block, so the row's scores fit the block's shared memory alone. The
// rounding points are the full path's: each score is an FP32 dot rounded
// to the 16-bit format (the q k^T GEMM's output), the softmax is causal_softmax_cuda.cu's
// (scale applied with __fmul_rn, a lane-strided FP32 sum, a butterfly, the
// same expf), each probability is rounded to it, and P v sums in FP32 in
// increasing j with one rounding. Only the GEMMs' own summation order
// (cuBLASLt's, not ours) separates the two paths.
#include "kernels/ops/attention_decode.h"

#include <cmath>
#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_op_context.h"
#include "kernels/error.h"

namespace ddp {
namespace {

constexpr unsigned kFullWarp = 0xffffffffu;
constexpr unsigned kWarpThreads = 32;
// The default dynamic shared memory a block may take without opting in.
constexpr size_t kSharedBytes = 48 * 1024;

__device__ float warp_all_max(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullWarp, v, offset));
  return v;
}

// Block z = i * heads + h: query i (at position past_len + i), head h.
template <class C>
__global__ void attention_decode_kernel(const lowp16* q, int q_stride, const lowp16* k_cache, const lowp16* v_cache,
                                        int kv_stride, int heads, int head_size, int past_len, float scale, lowp16* out,
                                        int out_stride) {
  DDP_DYNAMIC_SHARED(float, row);  // [visible]: the scaled scores, then the rounded probabilities
  const int i = static_cast<int>(blockIdx.x) / heads;
  const int h = static_cast<int>(blockIdx.x) % heads;
  const int lane = static_cast<int>(threadIdx.x);
  const int visible = past_len + i + 1;
  const lowp16* q_row = q + static_cast<size_t>(i) * q_stride + static_cast<size_t>(h) * head_size;
  float max_v = -INFINITY;
  for (int j = lane; j < visible; j += kWarpThreads) {
    const lowp16* k_row = k_cache + static_cast<size_t>(j) * kv_stride + static_cast<size_t>(h) * head_size;
    float dot = 0.0f;
    for (int d = 0; d < head_size; ++d) dot = fmaf(C::widen(q_row[d]), C::widen(k_row[d]), dot);
    row[j] = __fmul_rn(scale, C::widen(C::narrow(dot)));
    max_v = fmaxf(max_v, row[j]);
  }
  max_v = warp_all_max(max_v);
  float sum = 0.0f;
  for (int j = lane; j < visible; j += kWarpThreads) sum += expf(row[j] - max_v);
  const float inv_sum = 1.0f / warp_all_sum(sum);
  for (int j = lane; j < visible; j += kWarpThreads) row[j] = C::widen(C::narrow(expf(row[j] - max_v) * inv_sum));
  __syncwarp();  // every lane reads every probability below
  lowp16* out_row = out + static_cast<size_t>(i) * out_stride + static_cast<size_t>(h) * head_size;
  for (int d = lane; d < head_size; d += kWarpThreads) {
    float acc = 0.0f;
    for (int j = 0; j < visible; ++j)
      acc = fmaf(row[j], C::widen(v_cache[static_cast<size_t>(j) * kv_stride + static_cast<size_t>(h) * head_size + d]),
                 acc);
    out_row[d] = C::narrow(acc);
  }
}

}  // namespace

int attention_decode_max_positions() { return static_cast<int>(kSharedBytes / sizeof(float)); }

void attention_decode_lowp_cuda(CudaOpContext& cuda, const AttentionDecode& op) {
  const int heads = op.heads, head_size = op.head_size, past_len = op.past_len, new_len = op.new_len;
  DDP_REQUIRE(heads >= 0 && head_size >= 0 && past_len >= 0 && new_len >= 0 && op.q_stride >= heads * head_size &&
                  op.kv_stride >= heads * head_size && op.out_stride >= heads * head_size,
              "attention_decode_lowp: bad shape");
  const long long blocks = static_cast<long long>(new_len) * heads;
  DDP_REQUIRE(blocks <= (1LL << 31) - 1, "attention_decode_lowp: too many (position, head) pairs");
  const long long positions = static_cast<long long>(past_len) + new_len;
  DDP_REQUIRE(positions <= attention_decode_max_positions(),
              "attention_decode_lowp: " + std::to_string(positions) + " positions, more than the " +
                  std::to_string(attention_decode_max_positions()) + " a block's shared memory holds");
  if (blocks == 0 || head_size == 0) return;
  const size_t shared_bytes = static_cast<size_t>(positions) * sizeof(float);
  with_codec(cuda.precision(), [&](auto codec) {
    using C = decltype(codec);
    launch_kernel<attention_decode_kernel<C>>(
        {static_cast<unsigned>(blocks), kWarpThreads, shared_bytes, cuda.stream()}, op.q, op.q_stride, op.k_cache,
        op.v_cache, op.kv_stride, heads, head_size, past_len, op.scale, op.out, op.out_stride);
  });
  DDP_CUDA_CHECK_LAUNCH();
}

}  // namespace ddp
