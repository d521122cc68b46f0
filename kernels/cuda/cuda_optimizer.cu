// cuda_optimizer.cu: unscale + Inf/NaN flag, L2 norm, SGD and AdamW steps.
// The per-element math is sgd_update_element (elementwise_math.h) and
// adamw_update_element (adamw_math.h), the functions the CPU loops call.
#include "kernels/cuda/cuda_optimizer.h"

#include <cmath>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/optimizer_preconditions.h"

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

struct Square {
  const float* x;
  __device__ double operator()(size_t i) const { return static_cast<double>(x[i]) * x[i]; }
};

struct SquareRoot {
  // Inf and NaN propagate through sqrt, as backend.h asks.
  __device__ float operator()(double sum) const { return static_cast<float>(sqrt(sum)); }
};

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

// One thread: the step state is a handful of scalars.
__global__ void step_status_prepare_kernel(StepStatus* status, double backward_divisor, double unscale_divisor,
                                           float lr) {
  step_status_prepare(*status, backward_divisor, unscale_divisor, lr);
}

__global__ void step_status_finish_kernel(LossScaleRule rule, StepStatus* status) { step_status_finish(rule, *status); }

}  // namespace

void launch_step_status_prepare(cudaStream_t stream, StepStatus* status, double backward_divisor,
                                double unscale_divisor, float lr) {
  launch_kernel<step_status_prepare_kernel>({1, 1, 0, stream}, status, backward_divisor, unscale_divisor, lr);
  DDP_CUDA_CHECK_LAUNCH();
}

void launch_step_status_finish(cudaStream_t stream, const LossScaleRule& rule, StepStatus* status) {
  launch_kernel<step_status_finish_kernel>({1, 1, 0, stream}, rule, status);
  DDP_CUDA_CHECK_LAUNCH();
}

void launch_unscale_lowp_to_fp32(cudaStream_t stream, Precision p, const lowp16* grads_lowp, float* grads_fp32,
                                 size_t count, ScalarArg inv_scale, int32_t* nonfinite_flag) {
  if (count == 0) return;
  with_codec(p, [&](auto codec) {
    launch_kernel<unscale_kernel<decltype(codec)>>({grid_for(count), kThreadsPerBlock, 0, stream}, grads_lowp,
                                                   grads_fp32, count, inv_scale, nonfinite_flag);
  });
  DDP_CUDA_CHECK_LAUNCH();
}

void launch_unscale_fp32(cudaStream_t stream, const float* grads_in, float* grads_out, size_t count,
                         ScalarArg inv_scale, int32_t* nonfinite_flag) {
  if (count == 0) return;
  launch_kernel<unscale_fp32_kernel>({grid_for(count), kThreadsPerBlock, 0, stream}, grads_in, grads_out, count,
                                     inv_scale, nonfinite_flag);
  DDP_CUDA_CHECK_LAUNCH();
}

size_t l2_norm_scratch_bytes() { return sum_scratch_bytes(); }

void launch_l2_norm_fp32(cudaStream_t stream, const float* x, size_t count, float* norm, void* scratch) {
  // count == 0 still runs and writes 0.
  launch_sum(stream, Square{x}, count, SquareRoot{}, norm, scratch);
}

void launch_sgd_update(cudaStream_t stream, Precision p, const SgdParams& params, const float* grads_fp32,
                       float* master_fp32, float* momentum_fp32, lowp16* weights_lowp, size_t count,
                       const int32_t* skip_flag) {
  // An empty range (its buffers null) passes the check and launches nothing.
  require_sgd_buffers(params, SgdGrads::unscaled(grads_fp32), momentum_fp32, count);
  if (count == 0) return;
  with_codec(p, [&](auto codec) {
    launch_kernel<sgd_kernel<decltype(codec), Fp32Grads>>({grid_for(count), kThreadsPerBlock, 0, stream}, params,
                                                          Fp32Grads{grads_fp32}, master_fp32, momentum_fp32,
                                                          weights_lowp, count, skip_flag);
  });
  DDP_CUDA_CHECK_LAUNCH();
}

void launch_sgd_update_lowp_grads(cudaStream_t stream, Precision p, const SgdParams& params, const lowp16* grads_lowp,
                                  ScalarArg inv_scale, float* master_fp32, float* momentum_fp32, lowp16* weights_lowp,
                                  size_t count, const int32_t* skip_flag) {
  require_sgd_buffers(params, SgdGrads::scaled(grads_lowp, inv_scale), momentum_fp32, count);
  if (count == 0) return;
  with_codec(p, [&](auto codec) {
    using C = decltype(codec);
    launch_kernel<sgd_kernel<C, LowpGradsUnscaled<C>>>({grid_for(count), kThreadsPerBlock, 0, stream}, params,
                                                       LowpGradsUnscaled<C>{grads_lowp, inv_scale}, master_fp32,
                                                       momentum_fp32, weights_lowp, count, skip_flag);
  });
  DDP_CUDA_CHECK_LAUNCH();
}

void launch_adamw_update(cudaStream_t stream, Precision p, const AdamWParams& params, const AdamWBuffers& buffers,
                         ScalarArg inv_scale, size_t offset, size_t count, const int32_t* skip_flag) {
  require_adamw_buffers(buffers, count);
  if (count == 0) return;
  with_codec(p, [&](auto codec) {
    launch_kernel<adamw_kernel<decltype(codec)>>({grid_for(count), kThreadsPerBlock, 0, stream}, params, buffers,
                                                 inv_scale, offset, count, skip_flag);
  });
  DDP_CUDA_CHECK_LAUNCH();
}

}  // namespace ddp
