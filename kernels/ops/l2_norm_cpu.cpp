// l2_norm_cpu.cpp: the CPU row of the L2 norm (l2_norm.h), on the calling
// thread in index order. Double accumulation: the reference must be at
// least as accurate as the CUDA row's tree it is compared with.
#include "kernels/ops/l2_norm.h"

#include <cmath>

namespace ddp {

void l2_norm_fp32_cpu(CpuBackend& /*cpu*/, const L2NormFp32& op) {
  double sum = 0.0;
  for (size_t i = 0; i < op.count; ++i) sum += static_cast<double>(op.x[i]) * op.x[i];
  *op.norm = static_cast<float>(std::sqrt(sum));
}

}  // namespace ddp
