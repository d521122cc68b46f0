// layernorm_cpu.cpp: the CPU rows of LayerNorm (layernorm.h). Rows are
// widened to FP32 a row at a time (half_convert.h: F16C where the CPU has
// it), computed with the shared math of transformer_math.h, and rounded
// once. The parameter sums (dgamma, dbeta) are split by columns, so each
// sum runs over the rows in increasing order on one thread whatever the
// thread count.
#include "kernels/ops/layernorm.h"

#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_elementwise.h"  // widen_lowp, narrow_fp32
#include "kernels/error.h"
#include "kernels/transformer_math.h"

namespace ddp {

void layernorm_forward_lowp_cpu(CpuBackend& cpu, const LayerNormForward& op) {
  const Precision p = cpu.precision();
  const lowp16* x = op.x;
  const int rows = op.rows, cols = op.cols;
  DDP_REQUIRE(rows >= 0 && cols > 0, "layernorm_forward_lowp: needs cols > 0");
  const size_t width = count_of(cols);
  std::vector<float> gamma32(width), beta32(width);
  cpu::widen_lowp(p, op.gamma, gamma32.data(), width);
  cpu::widen_lowp(p, op.beta, beta32.data(), width);
  cpu.parallel_rows(count_of(rows), width, [&](size_t r0, size_t r1) {
    std::vector<float> row(width), out(width);
    for (size_t r = r0; r < r1; ++r) {
      cpu::widen_lowp(p, x + r * width, row.data(), width);
      float sum = 0.0f;
      for (size_t c = 0; c < width; ++c) sum += row[c];
      const float m = sum / static_cast<float>(width);
      float sq = 0.0f;
      for (size_t c = 0; c < width; ++c) sq += (row[c] - m) * (row[c] - m);
      const float rs = layernorm_rstd(sq / static_cast<float>(width), op.eps);
      for (size_t c = 0; c < width; ++c)
        out[c] = layernorm_output(layernorm_xhat(row[c], m, rs), gamma32[c], beta32[c]);
      cpu::narrow_fp32(p, out.data(), op.y + r * width, width);
      op.mean[r] = m;
      op.rstd[r] = rs;
    }
  });
}

void layernorm_backward_lowp_cpu(CpuBackend& cpu, const LayerNormBackward& op) {
  const Precision p = cpu.precision();
  CpuThreadPool& pool = cpu.pool();
  const lowp16 *dy = op.dy, *x = op.x;
  const float *mean = op.mean, *rstd = op.rstd;
  lowp16 *dx = op.dx, *dgamma = op.dgamma, *dbeta = op.dbeta;
  const bool accumulate_dx = op.accumulate_dx, accumulate_params = op.accumulate_params;
  DDP_REQUIRE(op.rows >= 0 && op.cols > 0, "layernorm_backward_lowp: needs cols > 0");
  const size_t width = count_of(op.cols), height = count_of(op.rows);
  std::vector<float> gamma32(width);
  cpu::widen_lowp(p, op.gamma, gamma32.data(), width);
  // The parameter sums first: dx may overwrite nothing they read, but a
  // caller may pass dx == dy (the gradient in place), so read dy before.
  pool.parallel_for(width, 16, cpu_pass_pieces(height * width, pool.size()), [&](size_t c0, size_t c1) {
    with_codec(p, [&](auto codec) {
      using C = decltype(codec);
      for (size_t c = c0; c < c1; ++c) {
        float sum_gx = 0.0f, sum_g = 0.0f;
        for (size_t r = 0; r < height; ++r) {
          const float d = C::widen(dy[r * width + c]);
          sum_gx += d * layernorm_xhat(C::widen(x[r * width + c]), mean[r], rstd[r]);
          sum_g += d;
        }
        dgamma[c] = C::narrow(sum_gx + (accumulate_params ? C::widen(dgamma[c]) : 0.0f));
        dbeta[c] = C::narrow(sum_g + (accumulate_params ? C::widen(dbeta[c]) : 0.0f));
      }
    });
  });
  cpu.parallel_rows(height, width, [&](size_t r0, size_t r1) {
    std::vector<float> xhat(width), g(width), out(width);
    for (size_t r = r0; r < r1; ++r) {
      cpu::widen_lowp(p, x + r * width, xhat.data(), width);
      cpu::widen_lowp(p, dy + r * width, g.data(), width);
      float sum_g = 0.0f, sum_gx = 0.0f;
      for (size_t c = 0; c < width; ++c) {
        xhat[c] = layernorm_xhat(xhat[c], mean[r], rstd[r]);
        g[c] *= gamma32[c];
        sum_g += g[c];
        sum_gx += g[c] * xhat[c];
      }
      const float mean_g = sum_g / static_cast<float>(width), mean_gx = sum_gx / static_cast<float>(width);
      if (accumulate_dx) cpu::widen_lowp(p, dx + r * width, out.data(), width);
      for (size_t c = 0; c < width; ++c) {
        const float d = layernorm_dx(g[c], xhat[c], mean_g, mean_gx, rstd[r]);
        out[c] = accumulate_dx ? out[c] + d : d;
      }
      cpu::narrow_fp32(p, out.data(), dx + r * width, width);
    }
  });
}

}  // namespace ddp
