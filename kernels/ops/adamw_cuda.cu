// adamw_cuda.cu: the CUDA row of the AdamW step (adamw.h): one
// grid-stride kernel whose per-element math is adamw_update_element
// (adamw_math.h), the function the CPU row calls.
#include "kernels/ops/adamw.h"

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_op_context.h"
#include "kernels/optimizer_preconditions.h"

namespace ddp {
namespace {

// One fused pass over [offset, offset + count): every thread reads the skip
// flag, lr and t from the device (adamw_scalars: two pow in double, once
// per thread, cheap beside the 28 bytes each element moves).
template <class C>
__global__ void adamw_kernel(AdamWParams step_params, AdamWBuffers b, ScalarArg inv_scale_arg, size_t offset,
                             size_t count, const int32_t* skip_flag) {
  if (skip_flag && *skip_flag != 0) return;
  const AdamWScalars s = adamw_scalars(step_params);
  const float inv_scale = inv_scale_arg.get();
  for (size_t k = global_thread_index(); k < count; k += grid_stride()) {
    const size_t i = offset + k;
    const float g = b.grads_fp32 ? b.grads_fp32[i] : unscale_element<C>(b.grads_lowp[i], inv_scale);
    float p = b.master_fp32[i], m = b.exp_avg_fp32[i], v = b.exp_avg_sq_fp32[i];
    adamw_update_element(s, g, b.decay_mask ? b.decay_mask[i] != 0 : true, p, m, v);
    b.master_fp32[i] = p;
    b.exp_avg_fp32[i] = m;
    b.exp_avg_sq_fp32[i] = v;
    b.weights_lowp[i] = C::narrow(p);
  }
}

}  // namespace

void adamw_update_cuda(CudaOpContext& cuda, const AdamWUpdate& op) {
  require_adamw_buffers(op.buffers, op.count);
  if (op.count == 0) return;
  with_codec(cuda.precision(), [&](auto codec) {
    launch_kernel<adamw_kernel<decltype(codec)>>({grid_for(op.count), kThreadsPerBlock, 0, cuda.stream()}, op.params,
                                                 op.buffers, op.inv_scale, op.offset, op.count, op.skip_flag);
  });
  DDP_CUDA_CHECK_LAUNCH();
}

}  // namespace ddp
