// rmsnorm_cpu.cpp: the CPU rows of RMSNorm (rmsnorm.h), the reference. Rows
// are widened to FP32 a row at a time (half_convert.h: F16C where the CPU
// has it), their sums run sequentially, and the per-element math and its
// roundings are rmsnorm.h's, the code the CUDA row runs. The weight
// gradient is split by columns, so each column sums its rows in increasing
// order on one thread whatever the thread count.
#include "kernels/ops/rmsnorm.h"

#include <algorithm>

#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_elementwise.h"  // widen_lowp, narrow_fp32
#include "kernels/error.h"

namespace ddp {

void rmsnorm_forward_lowp_cpu(CpuBackend& cpu, const RmsNormForward& op) {
  const Precision p = cpu.precision();
  const lowp16* x = op.x;
  lowp16* y = op.y;
  float* rstd = op.rstd;
  const float eps = op.eps;
  DDP_REQUIRE(op.rows >= 0 && op.cols > 0, "rmsnorm_forward_lowp: needs rows >= 0 and cols > 0");
  if (op.rows == 0) return;
  const size_t width = count_of(op.cols), height = count_of(op.rows);
  std::vector<float> weight32(width);
  cpu::widen_lowp(p, op.weight, weight32.data(), width);
  cpu.parallel_rows(height, width, [&](size_t r0, size_t r1) {
    std::vector<float> row(width);
    with_codec(p, [&](auto codec) {
      using C = decltype(codec);
      for (size_t r = r0; r < r1; ++r) {
        cpu::widen_lowp(p, x + r * width, row.data(), width);
        float sum_sq = 0.0f;
        for (size_t c = 0; c < width; ++c) sum_sq += row[c] * row[c];
        const float rs = rmsnorm_rstd(sum_sq / static_cast<float>(width), eps);
        lowp16* yr = y + r * width;
        for (size_t c = 0; c < width; ++c) yr[c] = rmsnorm_output<C>(weight32[c], rmsnorm_hidden<C>(row[c], rs));
        rstd[r] = rs;
      }
    });
  });
}

void rmsnorm_backward_lowp_cpu(CpuBackend& cpu, const RmsNormBackward& op) {
  const Precision p = cpu.precision();
  CpuThreadPool& pool = cpu.pool();
  const lowp16 *dy = op.dy, *x = op.x;
  const float* rstd = op.rstd;
  lowp16 *dx = op.dx, *dweight = op.dweight;
  const bool accumulate_dx = op.accumulate_dx, accumulate_weight = op.accumulate_weight;
  DDP_REQUIRE(op.rows >= 0 && op.cols > 0, "rmsnorm_backward_lowp: needs rows >= 0 and cols > 0");
  if (op.rows == 0) {  // no rows: the sums are 0 (LayerNorm's rule), dx has no rows
    if (!op.accumulate_weight) std::fill(op.dweight, op.dweight + count_of(op.cols), lowp16{0});
    return;
  }
  const size_t width = count_of(op.cols), height = count_of(op.rows);
  std::vector<float> weight32(width);
  cpu::widen_lowp(p, op.weight, weight32.data(), width);
  // dweight[c] = sum_r dy * h, h recomputed as the forward rounded it; each
  // column on one thread, its rows in increasing order.
  pool.parallel_for(width, 16, cpu_pass_pieces(height * width, pool.size()), [&](size_t c0, size_t c1) {
    with_codec(p, [&](auto codec) {
      using C = decltype(codec);
      for (size_t c = c0; c < c1; ++c) {
        float sum = 0.0f;
        for (size_t r = 0; r < height; ++r) {
          const size_t at = r * width + c;
          sum += C::widen(dy[at]) * C::widen(rmsnorm_hidden<C>(C::widen(x[at]), rstd[r]));
        }
        dweight[c] = C::narrow(sum + (accumulate_weight ? C::widen(dweight[c]) : 0.0f));
      }
    });
  });
  cpu.parallel_rows(height, width, [&](size_t r0, size_t r1) {
    std::vector<float> xhat(width), g(width), out(width);
    for (size_t r = r0; r < r1; ++r) {
      cpu::widen_lowp(p, x + r * width, xhat.data(), width);
      cpu::widen_lowp(p, dy + r * width, g.data(), width);
      const float rs = rstd[r];
      float sum_gx = 0.0f;
      for (size_t c = 0; c < width; ++c) {
        xhat[c] = rmsnorm_xhat(xhat[c], rs);
        g[c] *= weight32[c];
        sum_gx += g[c] * xhat[c];
      }
      const float mean_gx = sum_gx / static_cast<float>(width);
      if (accumulate_dx) cpu::widen_lowp(p, dx + r * width, out.data(), width);
      for (size_t c = 0; c < width; ++c) {
        const float d = rmsnorm_dx(g[c], xhat[c], mean_gx, rs);
        out[c] = accumulate_dx ? out[c] + d : d;
      }
      cpu::narrow_fp32(p, out.data(), dx + r * width, width);
    }
  });
}

}  // namespace ddp
