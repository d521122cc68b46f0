// cpu_transformer.h: the CPU loops of the GPT's Backend operations
// (backend.h, "transformer operations"), split over
// CpuBackend's thread pool by rows or columns. Every FP32 sum runs over its
// index in increasing order on one thread, so results do not depend on the
// thread count; the per-element math is transformer_math.h (shared with
// CUDA). Semantics and argument order: the Backend method of the same name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/backend.h"
#include "kernels/lowp_codec.h"
#include "kernels/cpu/cpu_thread_pool.h"

namespace ddp::cpu {

// Reused between calls (a training step allocates nothing once warm).
struct TransformerScratch {
  std::vector<int32_t> row_order;    // rows sorted by token, stable
  std::vector<int32_t> token_start;  // [vocab + 1] offsets into row_order
};

void embedding_forward(Precision p, CpuThreadPool& pool, const int32_t* tokens, const lowp16* wte, const lowp16* wpe,
                       int batch, int seq_len, int channels, int vocab, lowp16* out);
void embedding_backward(Precision p, CpuThreadPool& pool, TransformerScratch& scratch, const int32_t* tokens,
                        const lowp16* dout, int batch, int seq_len, int channels, int vocab, lowp16* d_wte,
                        lowp16* d_wpe, bool accumulate);
void layernorm_forward(Precision p, CpuThreadPool& pool, const lowp16* x, const lowp16* gamma, const lowp16* beta,
                       int rows, int cols, float eps, lowp16* y, float* mean, float* rstd);
void layernorm_backward(Precision p, CpuThreadPool& pool, const lowp16* dy, const lowp16* x, const lowp16* gamma,
                        const float* mean, const float* rstd, int rows, int cols, lowp16* dx, bool accumulate_dx,
                        lowp16* dgamma, lowp16* dbeta, bool accumulate_params);
void causal_softmax_forward(Precision p, CpuThreadPool& pool, const lowp16* scores, int batch_heads, int seq_len,
                            float scale, lowp16* probs);
void causal_softmax_backward(Precision p, CpuThreadPool& pool, const lowp16* probs, const lowp16* dprobs,
                             int batch_heads, int seq_len, float scale, lowp16* dscores);
void add(Precision p, CpuThreadPool& pool, const lowp16* a, const lowp16* b, lowp16* y, size_t count);
void rows_to_heads(CpuThreadPool& pool, const lowp16* rows, int row_stride, int batch, int seq_len, int heads,
                   int head_size, lowp16* heads_out);
void heads_to_rows(CpuThreadPool& pool, const lowp16* heads_in, int batch, int seq_len, int heads, int head_size,
                   lowp16* rows, int row_stride);
void attention_decode(Precision p, CpuThreadPool& pool, const lowp16* q, int q_stride, const lowp16* k_cache,
                      const lowp16* v_cache, int kv_stride, int heads, int head_size, int past_len, int new_len,
                      float scale, lowp16* out, int out_stride);

}  // namespace ddp::cpu
