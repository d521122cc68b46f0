// unscale_cpu.cpp: the CPU rows of the unscale ops (unscale.h): the range
// loops of cpu_elementwise.h over pieces on CpuBackend's threads; a piece
// that meets an Inf/NaN says so, and the flag is set once after the pass.
#include "kernels/ops/unscale.h"

#include <atomic>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_elementwise.h"

namespace ddp {

void unscale_lowp_to_fp32_cpu(CpuBackend& cpu, const UnscaleLowpToFp32& op) {
  const float inv_scale = op.inv_scale.get();
  std::atomic<bool> bad{false};
  cpu.parallel_pass(op.count, [&](size_t i0, size_t i1) {
    float* out = op.grads_fp32 ? op.grads_fp32 + i0 : nullptr;
    if (cpu::unscale_range(cpu.precision(), op.grads_lowp + i0, out, i1 - i0, inv_scale)) bad.store(true);
  });
  if (bad.load() && op.nonfinite_flag != nullptr) *op.nonfinite_flag = 1;
}

void unscale_fp32_cpu(CpuBackend& cpu, const UnscaleFp32& op) {
  const float inv_scale = op.inv_scale.get();
  std::atomic<bool> bad{false};
  cpu.parallel_pass(op.count, [&](size_t i0, size_t i1) {
    if (cpu::unscale_fp32_range(op.grads_in + i0, op.grads_out + i0, i1 - i0, inv_scale)) bad.store(true);
  });
  if (bad.load() && op.nonfinite_flag != nullptr) *op.nonfinite_flag = 1;
}

}  // namespace ddp
