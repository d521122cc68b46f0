// causal_softmax_cpu.cpp: the CPU rows of the causal softmax
// (causal_softmax.h). Rows are widened to FP32 a row at a time
// (half_convert.h: F16C where the CPU has it), computed with the shared
// math of transformer_math.h, and rounded once. Rows are split over
// CpuBackend's threads; every FP32 sum runs over its row in increasing
// order on one thread, so the bits never depend on the split.
#include "kernels/ops/causal_softmax.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_elementwise.h"  // widen_lowp, narrow_fp32
#include "kernels/cpu/cpu_softmax_rows.h"
#include "kernels/error.h"
#include "kernels/transformer_math.h"

namespace ddp {

void causal_softmax_forward_lowp_cpu(CpuBackend& cpu, const CausalSoftmaxForward& op) {
  const Precision p = cpu.precision();
  const int batch_heads = op.batch_heads, seq_len = op.seq_len;
  const float scale = op.scale;
  const lowp16* scores = op.scores;
  lowp16* probs = op.probs;
  DDP_REQUIRE(batch_heads >= 0 && seq_len >= 0, "causal_softmax_forward_lowp: negative shape");
  const size_t t_count = count_of(seq_len), rows = count_of(batch_heads) * t_count;
  cpu.parallel_rows(rows, t_count, [&](size_t r0, size_t r1) {
    std::vector<float> v(t_count);
    for (size_t r = r0; r < r1; ++r) {
      const size_t i = r % t_count, visible = i + 1;
      cpu::widen_lowp(p, scores + r * t_count, v.data(), visible);
      float max_v = -std::numeric_limits<float>::infinity();
      for (size_t j = 0; j < visible; ++j) max_v = std::max(max_v, v[j] = scale * v[j]);
      const float sum = cpu::exp_shifted_sum(v.data(), max_v, v.data(), visible);
      const float inv_sum = 1.0f / sum;
      for (size_t j = 0; j < visible; ++j) v[j] *= inv_sum;
      std::fill(v.begin() + static_cast<std::ptrdiff_t>(visible), v.end(), 0.0f);  // masked: exactly 0
      cpu::narrow_fp32(p, v.data(), probs + r * t_count, t_count);
    }
  });
}

void causal_softmax_backward_lowp_cpu(CpuBackend& cpu, const CausalSoftmaxBackward& op) {
  const Precision p = cpu.precision();
  const int batch_heads = op.batch_heads, seq_len = op.seq_len;
  const float scale = op.scale;
  const lowp16* probs = op.probs;
  const lowp16* dprobs = op.dprobs;
  lowp16* dscores = op.dscores;
  DDP_REQUIRE(batch_heads >= 0 && seq_len >= 0, "causal_softmax_backward_lowp: negative shape");
  const size_t t_count = count_of(seq_len), rows = count_of(batch_heads) * t_count;
  cpu.parallel_rows(rows, t_count, [&](size_t r0, size_t r1) {
    std::vector<float> prob(t_count), dp(t_count);
    for (size_t r = r0; r < r1; ++r) {
      const size_t i = r % t_count, visible = i + 1;
      cpu::widen_lowp(p, probs + r * t_count, prob.data(), visible);
      cpu::widen_lowp(p, dprobs + r * t_count, dp.data(), visible);
      float dot = 0.0f;
      for (size_t j = 0; j < visible; ++j) dot += prob[j] * dp[j];
      for (size_t j = 0; j < visible; ++j) prob[j] = causal_softmax_grad(prob[j], dp[j], dot, scale);
      std::fill(prob.begin() + static_cast<std::ptrdiff_t>(visible), prob.end(), 0.0f);
      cpu::narrow_fp32(p, prob.data(), dscores + r * t_count, t_count);
    }
  });
}

}  // namespace ddp
