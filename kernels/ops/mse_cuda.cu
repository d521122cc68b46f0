// mse_cuda.cu: the CUDA rows of the MSE ops (mse.h): the loss by the
// two-pass deterministic sum of cuda_common.cuh (FP64 partials in a fixed
// tree), the gradient by one grid-stride kernel with the CPU row's float
// operations.
#include "kernels/ops/mse.h"

#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_op_context.h"
#include "kernels/error.h"

namespace ddp {
namespace {

template <class C>
struct SquaredError {
  const lowp16* pred;
  const float* target;
  __device__ double operator()(size_t i) const {
    const float d = C::widen(pred[i]) - target[i];
    return static_cast<double>(d) * d;
  }
};

struct MeanOver {
  double count;  // 0 gives 0, as CpuBackend
  __device__ float operator()(double sum) const { return count > 0 ? static_cast<float>(sum / count) : 0.0f; }
};

// coef = 2 * loss_scale / count, the same float operations as CpuBackend.
template <class C>
__global__ void mse_backward_kernel(const lowp16* pred, const float* target, size_t count, ScalarArg loss_scale,
                                    lowp16* dpred) {
  const float coef = 2.0f * loss_scale.get() / static_cast<float>(count);
  for (size_t i = global_thread_index(); i < count; i += grid_stride())
    dpred[i] = C::narrow(coef * (C::widen(pred[i]) - target[i]));
}

size_t element_count(int rows, int cols, const char* op) {
  DDP_REQUIRE(rows >= 0 && cols >= 0, std::string(op) + ": negative shape");
  return static_cast<size_t>(rows) * static_cast<size_t>(cols);
}

}  // namespace

void mse_forward_cuda(CudaOpContext& cuda, const MseForward& op) {
  const size_t count = element_count(op.rows, op.cols, op.kName);
  void* scratch = cuda.scratch(sum_scratch_bytes());
  // count == 0 still runs and writes 0.
  with_codec(cuda.precision(), [&](auto codec) {
    using C = decltype(codec);
    launch_sum(cuda.stream(), SquaredError<C>{op.pred, op.target}, count, MeanOver{static_cast<double>(count)},
               op.loss_mean, scratch);
  });
}

void mse_backward_cuda(CudaOpContext& cuda, const MseBackward& op) {
  const size_t count = element_count(op.rows, op.cols, op.kName);
  if (count == 0) return;
  with_codec(cuda.precision(), [&](auto codec) {
    using C = decltype(codec);
    launch_kernel<mse_backward_kernel<C>>({grid_for(count), kThreadsPerBlock, 0, cuda.stream()}, op.pred, op.target,
                                          count, op.loss_scale, op.dpred);
  });
  DDP_CUDA_CHECK_LAUNCH();
}

}  // namespace ddp
