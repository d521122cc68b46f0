// gemm_cpu.cpp: the CPU rows of the GEMM ops (gemm.h): cpu/cpu_gemm.h's
// widening, BLAS and rounding passes on CpuBackend's threads. The widening
// scratch is memory a GEMM needs like any Buffer (the classifier's
// [rows, vocab] products widen to FP32 four times their 16-bit bytes), so
// its growth is counted in the backend's allocation tally.
#include "kernels/ops/gemm.h"

#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_gemm.h"

namespace ddp {

namespace {

// One product's scratch, and one per piece of a batch (cpu_gemm.h).
struct BatchedGemmScratch {
  std::vector<CpuGemmScratch> pieces;
  size_t bytes() const {
    size_t total = 0;
    for (const CpuGemmScratch& s : pieces) total += s.bytes();
    return total;
  }
};

}  // namespace

void gemm_lowp_cpu(CpuBackend& cpu, const GemmLowp& op) {
  CpuGemmScratch& scratch = cpu.row_scratch<CpuGemmScratch>();
  const size_t before = scratch.bytes();
  cpu_gemm_lowp(cpu.precision(), op, cpu.pool(), scratch);
  cpu.count_allocation(scratch.bytes() - before);
}

void gemm_lowp_to_fp32_cpu(CpuBackend& cpu, const GemmLowpToFp32& op) {
  CpuGemmScratch& scratch = cpu.row_scratch<CpuGemmScratch>();
  const size_t before = scratch.bytes();
  cpu_gemm_lowp_to_fp32(cpu.precision(), op.gemm, op.c_fp32, cpu.pool(), scratch);
  cpu.count_allocation(scratch.bytes() - before);
}

void gemm_batched_lowp_cpu(CpuBackend& cpu, const GemmBatchedLowp& op) {
  BatchedGemmScratch& scratch = cpu.row_scratch<BatchedGemmScratch>();
  const size_t before = scratch.bytes();
  cpu_gemm_batched_lowp(cpu.precision(), op.gemm, op.batch_count, op.stride_a, op.stride_b, op.stride_c, cpu.pool(),
                        scratch.pieces);
  cpu.count_allocation(scratch.bytes() - before);
}

}  // namespace ddp
