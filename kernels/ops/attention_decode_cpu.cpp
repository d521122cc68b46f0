// attention_decode_cpu.cpp: the CPU row of the decoder's attention against
// cached keys and values (attention_decode.h). One (query, head) pair per
// index of a pass over CpuBackend's threads; its sums run on one thread in
// an order fixed by the shapes, so the bits never depend on the split.
#include "kernels/ops/attention_decode.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_elementwise.h"  // widen_lowp, narrow_fp32
#include "kernels/cpu/cpu_softmax_rows.h"
#include "kernels/error.h"
#include "kernels/lowp_codec.h"

namespace ddp {

void attention_decode_lowp_cpu(CpuBackend& cpu, const AttentionDecode& op) {
  const Precision p = cpu.precision();
  const int heads = op.heads, head_size = op.head_size, past_len = op.past_len, new_len = op.new_len;
  const int q_stride = op.q_stride, kv_stride = op.kv_stride, out_stride = op.out_stride;
  const float scale = op.scale;
  const lowp16* q = op.q;
  const lowp16* k_cache = op.k_cache;
  const lowp16* v_cache = op.v_cache;
  lowp16* out = op.out;
  DDP_REQUIRE(heads >= 0 && head_size >= 0 && past_len >= 0 && new_len >= 0 && q_stride >= heads * head_size &&
                  kv_stride >= heads * head_size && out_stride >= heads * head_size,
              "attention_decode_lowp: bad shape");
  const size_t nh = count_of(heads), hs = count_of(head_size), past = count_of(past_len);
  const size_t kv_ld = count_of(kv_stride);
  // One (query, head) pair per index; its sums run on one thread.
  cpu.parallel_rows(count_of(new_len) * nh, (past + count_of(new_len)) * hs, [&](size_t o0, size_t o1) {
    with_codec(p, [&](auto codec) {
      using C = decltype(codec);
      // x rounded to the working precision and widened back: what a GEMM's
      // 16-bit output holds.
      const auto rounded = [](float x) { return C::widen(C::narrow(x)); };
      std::vector<float> q32(hs), row32(hs), out32(hs);
      std::vector<float> v(past + count_of(new_len));
      for (size_t o = o0; o < o1; ++o) {
        const size_t i = o / nh, h = o % nh, visible = past + i + 1;
        cpu::widen_lowp(p, q + i * count_of(q_stride) + h * hs, q32.data(), hs);
        // Scores rounded to the working precision, as the full path's q k^T GEMM writes them.
        // Each dot is an FMA chain in increasing d: the order and the fused
        // steps of OpenBLAS's SGEMM kernels on FMA CPUs, so the FP32 sums
        // usually match the GEMM's bit for bit.
        for (size_t j = 0; j < visible; ++j) {
          cpu::widen_lowp(p, k_cache + j * kv_ld + h * hs, row32.data(), hs);
          float dot = 0.0f;
          for (size_t d = 0; d < hs; ++d) dot = std::fma(q32[d], row32[d], dot);
          v[j] = rounded(dot);
        }
        // The causal softmax's row, as causal_softmax_forward_lowp_cpu computes it.
        float max_v = -std::numeric_limits<float>::infinity();
        for (size_t j = 0; j < visible; ++j) max_v = std::max(max_v, v[j] = scale * v[j]);
        const float inv_sum = 1.0f / cpu::exp_shifted_sum(v.data(), max_v, v.data(), visible);
        for (size_t j = 0; j < visible; ++j) v[j] = rounded(v[j] * inv_sum);
        // P v, an FMA chain over increasing j per output (the masked
        // positions of the full path add exact zeros to its chain).
        std::fill(out32.begin(), out32.end(), 0.0f);
        for (size_t j = 0; j < visible; ++j) {
          cpu::widen_lowp(p, v_cache + j * kv_ld + h * hs, row32.data(), hs);
          for (size_t d = 0; d < hs; ++d) out32[d] = std::fma(v[j], row32[d], out32[d]);
        }
        cpu::narrow_fp32(p, out32.data(), out + i * count_of(out_stride) + h * hs, hs);
      }
    });
  });
}

}  // namespace ddp
