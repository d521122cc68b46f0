// elementwise_cpu.cpp: the CPU rows of the 16-bit element-wise ops
// (elementwise.h): the CPU's range loops (cpu_elementwise.h: the codecs'
// conversions, F16C where the CPU has it) over pieces of the range on
// CpuBackend's threads.
#include "kernels/ops/elementwise.h"

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_elementwise.h"

namespace ddp {

void cast_fp32_to_lowp_cpu(CpuBackend& cpu, const CastFp32ToLowp& op) {
  cpu.parallel_pass(
      op.count, [&](size_t i0, size_t i1) { cpu::narrow_fp32(cpu.precision(), op.src + i0, op.dst + i0, i1 - i0); });
}

void add_lowp_cpu(CpuBackend& cpu, const AddLowp& op) {
  cpu.parallel_pass(op.count, [&](size_t i0, size_t i1) {
    cpu::add_lowp_range(cpu.precision(), op.a + i0, op.b + i0, op.y + i0, i1 - i0);
  });
}

void add_fp32_into_lowp_cpu(CpuBackend& cpu, const AddFp32IntoLowp& op) {
  cpu.parallel_pass(op.count, [&](size_t i0, size_t i1) {
    with_codec(cpu.precision(), [&](auto codec) {
      for (size_t i = i0; i < i1; ++i) op.y[i] = codec.narrow(codec.widen(op.y[i]) + op.src[i]);
    });
  });
}

}  // namespace ddp
