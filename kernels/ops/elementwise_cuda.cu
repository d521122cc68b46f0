// elementwise_cuda.cu: the CUDA rows of the 16-bit element-wise ops
// (elementwise.h): one grid-stride kernel each, its per-element math the
// codecs' (lowp_codec.h), the same functions the CPU rows call.
#include "kernels/ops/elementwise.h"

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_op_context.h"

namespace ddp {
namespace {

template <class C>
__global__ void cast_fp32_to_lowp_kernel(const float* src, lowp16* dst, size_t count) {
  for (size_t i = global_thread_index(); i < count; i += grid_stride()) dst[i] = C::narrow(src[i]);
}

// No __restrict__: y may be a or b.
template <class C>
__global__ void add_lowp_kernel(const lowp16* a, const lowp16* b, lowp16* y, size_t count) {
  for (size_t i = global_thread_index(); i < count; i += grid_stride())
    y[i] = C::narrow(C::widen(a[i]) + C::widen(b[i]));
}

template <class C>
__global__ void add_fp32_into_lowp_kernel(const float* src, lowp16* y, size_t count) {
  for (size_t i = global_thread_index(); i < count; i += grid_stride()) y[i] = C::narrow(C::widen(y[i]) + src[i]);
}

}  // namespace

void cast_fp32_to_lowp_cuda(CudaOpContext& cuda, const CastFp32ToLowp& op) {
  if (op.count == 0) return;
  with_codec(cuda.precision(), [&](auto codec) {
    using C = decltype(codec);
    launch_kernel<cast_fp32_to_lowp_kernel<C>>({grid_for(op.count), kThreadsPerBlock, 0, cuda.stream()}, op.src, op.dst,
                                               op.count);
  });
  DDP_CUDA_CHECK_LAUNCH();
}

void add_lowp_cuda(CudaOpContext& cuda, const AddLowp& op) {
  if (op.count == 0) return;
  with_codec(cuda.precision(), [&](auto codec) {
    using C = decltype(codec);
    launch_kernel<add_lowp_kernel<C>>({grid_for(op.count), kThreadsPerBlock, 0, cuda.stream()}, op.a, op.b, op.y,
                                      op.count);
  });
  DDP_CUDA_CHECK_LAUNCH();
}

void add_fp32_into_lowp_cuda(CudaOpContext& cuda, const AddFp32IntoLowp& op) {
  if (op.count == 0) return;
  with_codec(cuda.precision(), [&](auto codec) {
    using C = decltype(codec);
    launch_kernel<add_fp32_into_lowp_kernel<C>>({grid_for(op.count), kThreadsPerBlock, 0, cuda.stream()}, op.src, op.y,
                                                op.count);
  });
  DDP_CUDA_CHECK_LAUNCH();
}

}  // namespace ddp
