// unscale_cuda.cu: the CUDA rows of the unscale ops (unscale.h): one
// grid-stride kernel each; a thread that meets an Inf/NaN stores 1 in the
// flag (every writer stores the same value, so the race is benign).
#include "kernels/ops/unscale.h"

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_op_context.h"
#include "kernels/elementwise_math.h"

namespace ddp {
namespace {

template <class C>
__global__ void unscale_kernel(const lowp16* grads_lowp, float* grads_fp32, size_t count, ScalarArg inv_scale_arg,
                               int32_t* nonfinite_flag) {
  const float inv_scale = inv_scale_arg.get();
  bool nonfinite = false;
  for (size_t i = global_thread_index(); i < count; i += grid_stride()) {
    const float g = unscale_element<C>(grads_lowp[i], inv_scale);
    if (grads_fp32) grads_fp32[i] = g;  // null: the check alone
    nonfinite |= !is_finite_float(g);
  }
  // Every writer stores the same value 1, so the race is benign; the flag is
  // never cleared here (the caller zeroes it once per step).
  if (nonfinite && nonfinite_flag) *nonfinite_flag = 1;
}

// No __restrict__: grads_out may be grads_in.
__global__ void unscale_fp32_kernel(const float* grads_in, float* grads_out, size_t count, ScalarArg inv_scale_arg,
                                    int32_t* nonfinite_flag) {
  const float inv_scale = inv_scale_arg.get();
  bool nonfinite = false;
  for (size_t i = global_thread_index(); i < count; i += grid_stride()) {
    const float g = __fmul_rn(grads_in[i], inv_scale);  // one rounding, as the CPU's multiply
    grads_out[i] = g;
    nonfinite |= !is_finite_float(g);
  }
  if (nonfinite && nonfinite_flag) *nonfinite_flag = 1;  // benign race, as unscale_kernel
}

}  // namespace

void unscale_lowp_to_fp32_cuda(CudaOpContext& cuda, const UnscaleLowpToFp32& op) {
  if (op.count == 0) return;
  with_codec(cuda.precision(), [&](auto codec) {
    launch_kernel<unscale_kernel<decltype(codec)>>({grid_for(op.count), kThreadsPerBlock, 0, cuda.stream()},
                                                   op.grads_lowp, op.grads_fp32, op.count, op.inv_scale,
                                                   op.nonfinite_flag);
  });
  DDP_CUDA_CHECK_LAUNCH();
}

void unscale_fp32_cuda(CudaOpContext& cuda, const UnscaleFp32& op) {
  if (op.count == 0) return;
  launch_kernel<unscale_fp32_kernel>({grid_for(op.count), kThreadsPerBlock, 0, cuda.stream()}, op.grads_in,
                                     op.grads_out, op.count, op.inv_scale, op.nonfinite_flag);
  DDP_CUDA_CHECK_LAUNCH();
}

}  // namespace ddp
