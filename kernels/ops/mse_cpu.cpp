// mse_cpu.cpp: the CPU rows of the MSE ops (mse.h), on the calling thread:
// the loss is one FP32 sum in element order.
#include "kernels/ops/mse.h"

#include <cstddef>
#include <string>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/error.h"

namespace ddp {

namespace {

size_t element_count(int rows, int cols, const char* op) {
  DDP_REQUIRE(rows >= 0 && cols >= 0, std::string(op) + ": negative shape");
  return static_cast<size_t>(rows) * static_cast<size_t>(cols);
}

}  // namespace

void mse_forward_cpu(CpuBackend& cpu, const MseForward& op) {
  const size_t n = element_count(op.rows, op.cols, op.kName);
  float sum = 0.0f;
  with_codec(cpu.precision(), [&](auto codec) {
    for (size_t i = 0; i < n; ++i) {
      const float d = codec.widen(op.pred[i]) - op.target[i];
      sum += d * d;
    }
  });
  *op.loss_mean = n ? sum / static_cast<float>(n) : 0.0f;
}

void mse_backward_cpu(CpuBackend& cpu, const MseBackward& op) {
  const size_t n = element_count(op.rows, op.cols, op.kName);
  const float coef = 2.0f * op.loss_scale.get() / static_cast<float>(n);
  with_codec(cpu.precision(), [&](auto codec) {
    for (size_t i = 0; i < n; ++i) op.dpred[i] = codec.narrow(coef * (codec.widen(op.pred[i]) - op.target[i]));
  });
}

}  // namespace ddp
