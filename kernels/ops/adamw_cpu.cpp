// adamw_cpu.cpp: the CPU row of the AdamW step (adamw.h): cpu_adamw.h's
// range loop over pieces on CpuBackend's threads, the buffers checked as
// the CUDA row checks them (optimizer_preconditions.h).
#include "kernels/ops/adamw.h"

#include "kernels/cpu/cpu_adamw.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/optimizer_preconditions.h"

namespace ddp {

void adamw_update_cpu(CpuBackend& cpu, const AdamWUpdate& op) {
  require_adamw_buffers(op.buffers, op.count);
  if (op.count == 0 || (op.skip_flag && *op.skip_flag)) return;
  const AdamWScalars scalars = adamw_scalars(op.params);
  const float inv_scale = op.inv_scale.get();
  cpu.parallel_pass(op.count, [&](size_t i0, size_t i1) {
    cpu::adamw_range(cpu.precision(), scalars, op.buffers, inv_scale, op.offset + i0, op.offset + i1);
  });
}

}  // namespace ddp
