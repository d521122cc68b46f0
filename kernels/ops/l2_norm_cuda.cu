// l2_norm_cuda.cu: the CUDA row of the L2 norm (l2_norm.h): the two-pass
// deterministic sum of cuda_common.cuh over FP64 squares, then the root.
#include "kernels/ops/l2_norm.h"

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_op_context.h"

namespace ddp {
namespace {

struct Square {
  const float* x;
  __device__ double operator()(size_t i) const { return static_cast<double>(x[i]) * x[i]; }
};

struct SquareRoot {
  // Inf and NaN propagate through sqrt, as backend.h asks.
  __device__ float operator()(double sum) const { return static_cast<float>(sqrt(sum)); }
};

}  // namespace

void l2_norm_fp32_cuda(CudaOpContext& cuda, const L2NormFp32& op) {
  void* scratch = cuda.scratch(sum_scratch_bytes());
  // count == 0 still runs and writes 0.
  launch_sum(cuda.stream(), Square{op.x}, op.count, SquareRoot{}, op.norm, scratch);
}

}  // namespace ddp
