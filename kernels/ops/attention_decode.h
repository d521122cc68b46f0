// attention_decode.h: attention of new positions against a cache of keys
// and values (the GPT's incremental decoder, gpt_decoder.h), with the
// rounding points of the full path (rows_to_heads, the q k^T GEMM, the
// causal softmax, the P v GEMM), so a decoded position gets the bits, or
// nearly, of the same position in a whole-window forward.
#pragma once

#include "kernels/lowp16.h"
#include "kernels/ops/op_dispatch.h"

namespace ddp {

// Rows are position-major with head h at columns h*hs .. h*hs + hs - 1: q
// [new_len, q_stride] (q inside qkv: q_stride 3C), k_cache and v_cache
// [past_len + new_len, kv_stride] with the new positions' keys and values
// already at rows past_len onward, out [new_len, out_stride] (merged heads,
// c_proj's input). Query i sits at position past_len + i and sees the
// positions j <= past_len + i:
//   s_j = fp16(q_i . k_j)                 FP32 products summed in increasing d
//   p_j = fp16(softmax_j(scale * s_j))    FP32 max, exp, sum: as causal_softmax_forward_lowp
//   out_i[d] = fp16(sum_j p_j v_j[d])     FP32, summed in increasing j
// Per (query, head); the sums' order is fixed by the shapes, so each row
// gives the same bits run to run. The CUDA row holds a query's scores in
// shared memory: the visible length is bounded
// (attention_decode_max_positions, below).
struct AttentionDecode {
  static constexpr const char* kName = "attention_decode_lowp";
  const lowp16* q = nullptr;
  int q_stride = 0;
  const lowp16* k_cache = nullptr;
  const lowp16* v_cache = nullptr;
  int kv_stride = 0;
  int heads = 0;
  int head_size = 0;
  int past_len = 0;
  int new_len = 0;
  float scale = 1.0f;
  lowp16* out = nullptr;
  int out_stride = 0;
};
void attention_decode_lowp_cpu(CpuBackend& cpu, const AttentionDecode& op);
void attention_decode_lowp_cuda(CudaOpContext& cuda, const AttentionDecode& op);
inline void attention_decode_lowp(Backend& backend, const AttentionDecode& op) {
  run_op(backend, op, attention_decode_lowp_cpu, DDP_CUDA_ROW(attention_decode_lowp_cuda));
}

// The most visible positions (past_len + new_len) the CUDA row takes: a
// block's dynamic shared memory holds the row's FP32 scores, within the
// default 48 KB a block may take without opting in. More are refused with
// a ddp::Error before any launch. Defined with the CUDA row
// (attention_decode_cuda.cu): CUDA and SIMT builds only.
int attention_decode_max_positions();

}  // namespace ddp
