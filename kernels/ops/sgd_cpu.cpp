// sgd_cpu.cpp: the CPU row of the SGD step (sgd.h): cpu_elementwise.h's
// range loops over pieces on CpuBackend's threads, the buffers checked as
// the CUDA row checks them (optimizer_preconditions.h).
#include "kernels/ops/sgd.h"

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_elementwise.h"
#include "kernels/optimizer_preconditions.h"

namespace ddp {

void sgd_update_cpu(CpuBackend& cpu, const SgdUpdate& op) {
  // An empty range (null buffers) passes the check and does nothing.
  require_sgd_buffers(op.params, op.grads, op.momentum_fp32, op.count);
  if (op.count == 0 || (op.skip_flag && *op.skip_flag)) return;
  const SgdParams params = resolved(op.params);
  const Precision p = cpu.precision();
  auto momentum_at = [&](size_t i0) { return op.momentum_fp32 ? op.momentum_fp32 + i0 : nullptr; };
  if (op.grads.fp32 != nullptr) {
    cpu.parallel_pass(op.count, [&](size_t i0, size_t i1) {
      cpu::sgd_range(p, params, op.grads.fp32 + i0, op.master_fp32 + i0, momentum_at(i0), op.weights_lowp + i0,
                     i1 - i0);
    });
    return;
  }
  const float inv_scale = op.grads.inv_scale.get();
  cpu.parallel_pass(op.count, [&](size_t i0, size_t i1) {
    cpu::sgd_lowp_grads_range(p, params, op.grads.lowp + i0, inv_scale, op.master_fp32 + i0, momentum_at(i0),
                              op.weights_lowp + i0, i1 - i0);
  });
}

}  // namespace ddp
