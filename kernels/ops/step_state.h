// step_state.h: the updates of the device-resident step state
// (step_status.h: the loss scale and its counters, the step's Inf/NaN flag,
// the optimizer steps taken), queued like any kernel so that a training
// step never waits for the host. Both rows apply step_status.h's functions
// (a one-thread kernel on CUDA), so their bits are the host rule's.
#pragma once

#include "kernels/ops/op_dispatch.h"
#include "kernels/step_status.h"

namespace ddp {

// Before the step: step_status_prepare(*status, backward_divisor,
// unscale_divisor, lr) (the step's flag cleared, 1/S and the lr set).
struct StepStatusPrepare {
  static constexpr const char* kName = "step_status_prepare";
  StepStatus* status = nullptr;  // one StepStatus of the backend's memory
  double backward_divisor = 1.0;
  double unscale_divisor = 1.0;
  float lr = 0.0f;
};
void step_status_prepare_cpu(CpuBackend& cpu, const StepStatusPrepare& op);
void step_status_prepare_cuda(CudaOpContext& cuda, const StepStatusPrepare& op);
inline void step_status_prepare(Backend& backend, const StepStatusPrepare& op) {
  run_op(backend, op, step_status_prepare_cpu, DDP_CUDA_ROW(step_status_prepare_cuda));
}

// After the step: step_status_finish(rule, *status) (the loss-scale rule on
// the step's flag, the counts).
struct StepStatusFinish {
  static constexpr const char* kName = "step_status_finish";
  LossScaleRule rule;
  StepStatus* status = nullptr;
};
void step_status_finish_cpu(CpuBackend& cpu, const StepStatusFinish& op);
void step_status_finish_cuda(CudaOpContext& cuda, const StepStatusFinish& op);
inline void step_status_finish(Backend& backend, const StepStatusFinish& op) {
  run_op(backend, op, step_status_finish_cpu, DDP_CUDA_ROW(step_status_finish_cuda));
}

}  // namespace ddp
