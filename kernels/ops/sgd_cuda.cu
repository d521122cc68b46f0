// sgd_cuda.cu: the CUDA row of the SGD step (sgd.h): one grid-stride
// kernel whose per-element math is sgd_update_element (elementwise_math.h),
// the function the CPU row calls; the skip flag and the step's scalars are
// read on the device, so the host never waits for them.
#include "kernels/ops/sgd.h"

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_op_context.h"
#include "kernels/optimizer_preconditions.h"

namespace ddp {
namespace {

// Gradient sources of the SGD kernel: the unscaled FP32 buffer, or the 16-bit
// gradients unscaled on the fly (the fused step).
// resolved(): the source with its scalars read, once per thread.
struct Fp32Grads {
  const float* g;
  __device__ Fp32Grads resolved() const { return *this; }
  __device__ float operator()(size_t i) const { return g[i]; }
};
template <class C>
struct LowpGradsUnscaled {
  const lowp16* g;
  ScalarArg inv_scale;
  __device__ LowpGradsUnscaled resolved() const { return {g, ScalarArg(inv_scale.get())}; }
  __device__ float operator()(size_t i) const { return unscale_element<C>(g[i], inv_scale.value); }  // after resolved()
};

template <class C, class Grads>
__global__ void sgd_kernel(SgdParams step_params, Grads grads_source, float* master_fp32, float* momentum_fp32,
                           lowp16* weights_lowp, size_t count, const int32_t* skip_flag) {
  // The skip decision (an overflow found by unscale) lives on the device, so
  // the host never waits for it; every thread reads it and leaves.
  if (skip_flag && *skip_flag != 0) return;
  const SgdParams params = resolved(step_params);
  const Grads grads = grads_source.resolved();
  for (size_t i = global_thread_index(); i < count; i += grid_stride()) {
    float p = master_fp32[i];
    float buf = momentum_fp32 ? momentum_fp32[i] : 0.0f;
    sgd_update_element(params, grads(i), p, buf);
    master_fp32[i] = p;
    if (momentum_fp32) momentum_fp32[i] = buf;
    if (weights_lowp) weights_lowp[i] = C::narrow(p);
  }
}

}  // namespace

void sgd_update_cuda(CudaOpContext& cuda, const SgdUpdate& op) {
  // An empty range (its buffers null) passes the check and launches nothing.
  require_sgd_buffers(op.params, op.grads, op.momentum_fp32, op.count);
  if (op.count == 0) return;
  const LaunchShape shape{grid_for(op.count), kThreadsPerBlock, 0, cuda.stream()};
  with_codec(cuda.precision(), [&](auto codec) {
    using C = decltype(codec);
    if (op.grads.fp32 != nullptr) {
      launch_kernel<sgd_kernel<C, Fp32Grads>>(shape, op.params, Fp32Grads{op.grads.fp32}, op.master_fp32,
                                              op.momentum_fp32, op.weights_lowp, op.count, op.skip_flag);
    } else {
      launch_kernel<sgd_kernel<C, LowpGradsUnscaled<C>>>(
          shape, op.params, LowpGradsUnscaled<C>{op.grads.lowp, op.grads.inv_scale}, op.master_fp32, op.momentum_fp32,
          op.weights_lowp, op.count, op.skip_flag);
    }
  });
  DDP_CUDA_CHECK_LAUNCH();
}

}  // namespace ddp
