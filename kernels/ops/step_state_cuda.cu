// step_state_cuda.cu: the CUDA rows of the step state's updates
// (step_state.h): one-thread kernels applying step_status.h's functions to
// the device-resident state.
#include "kernels/ops/step_state.h"

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_op_context.h"

namespace ddp {
namespace {

// One thread: the step state is a handful of scalars.
__global__ void step_status_prepare_kernel(StepStatus* status, double backward_divisor, double unscale_divisor,
                                           float lr) {
  step_status_prepare(*status, backward_divisor, unscale_divisor, lr);
}

__global__ void step_status_finish_kernel(LossScaleRule rule, StepStatus* status) { step_status_finish(rule, *status); }

}  // namespace

void step_status_prepare_cuda(CudaOpContext& cuda, const StepStatusPrepare& op) {
  launch_kernel<step_status_prepare_kernel>({1, 1, 0, cuda.stream()}, op.status, op.backward_divisor,
                                            op.unscale_divisor, op.lr);
  DDP_CUDA_CHECK_LAUNCH();
}

void step_status_finish_cuda(CudaOpContext& cuda, const StepStatusFinish& op) {
  launch_kernel<step_status_finish_kernel>({1, 1, 0, cuda.stream()}, op.rule, op.status);
  DDP_CUDA_CHECK_LAUNCH();
}

}  // namespace ddp
