// step_state_cpu.cpp: the CPU rows of the step state's updates
// (step_state.h): the host functions of step_status.h on the state, which
// the CPU backend's memory holds.
#include "kernels/ops/step_state.h"

namespace ddp {

void step_status_prepare_cpu(CpuBackend& /*cpu*/, const StepStatusPrepare& op) {
  step_status_prepare(*op.status, op.backward_divisor, op.unscale_divisor, op.lr);
}

void step_status_finish_cpu(CpuBackend& /*cpu*/, const StepStatusFinish& op) {
  step_status_finish(op.rule, *op.status);
}

}  // namespace ddp
