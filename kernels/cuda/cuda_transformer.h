// cuda_transformer.h: launchers of the GPT's CUDA kernels (backend.h,
// "transformer operations"): embeddings (cuda_embedding.cu), LayerNorm, the
// residual add and the head permutes (cuda_transformer.cu), the causal
// softmax (cuda_attention.cu), the decoder's attention against cached keys
// and values (cuda_attention_decode.cu). Each queues its kernels on `stream` and
// checks the launches; semantics are those of the Backend method of the same
// name. Reductions need device scratch of the stated size, owned by the
// caller (CudaBackend's scratch). Plain C++: g++ can include it.
//
// Determinism: no floating-point atomics. Row statistics (LayerNorm, the
// softmax) are warp butterflies; LayerNorm's dgamma/dbeta are per-chunk
// partial sums of kLayerNormRowsPerChunk rows, added chunk by chunk; the
// embedding table's gradient sums each token's rows in increasing order
// after a stable radix sort of the rows by token (CUB), so it is the CPU's
// order and the CPU's bits.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/lowp_codec.h"

namespace ddp {

void launch_embedding_forward_lowp(cudaStream_t stream, Precision p, const int32_t* tokens, const lowp16* wte,
                                   const lowp16* wpe, int batch, int seq_len, int channels, int vocab, lowp16* out);
size_t embedding_backward_scratch_bytes(int rows);
void launch_embedding_backward_lowp(cudaStream_t stream, Precision p, const int32_t* tokens, const lowp16* dout,
                                    int batch, int seq_len, int channels, int vocab, lowp16* d_wte, lowp16* d_wpe,
                                    bool accumulate, void* scratch);

void launch_layernorm_forward_lowp(cudaStream_t stream, Precision p, const lowp16* x, const lowp16* gamma,
                                   const lowp16* beta, int rows, int cols, float eps, lowp16* y, float* mean,
                                   float* rstd);
constexpr int kLayerNormRowsPerChunk = 64;
size_t layernorm_backward_scratch_bytes(int rows, int cols);
void launch_layernorm_backward_lowp(cudaStream_t stream, Precision p, const lowp16* dy, const lowp16* x,
                                    const lowp16* gamma, const float* mean, const float* rstd, int rows, int cols,
                                    lowp16* dx, bool accumulate_dx, lowp16* dgamma, lowp16* dbeta,
                                    bool accumulate_params, void* scratch);

void launch_add_lowp(cudaStream_t stream, Precision p, const lowp16* a, const lowp16* b, lowp16* y, size_t count);
void launch_rows_to_heads_lowp(cudaStream_t stream, const lowp16* rows, int row_stride, int batch, int seq_len,
                               int heads, int head_size, lowp16* heads_out);
void launch_heads_to_rows_lowp(cudaStream_t stream, const lowp16* heads_in, int batch, int seq_len, int heads,
                               int head_size, lowp16* rows, int row_stride);

void launch_causal_softmax_forward_lowp(cudaStream_t stream, Precision p, const lowp16* scores, int batch_heads,
                                        int seq_len, float scale, lowp16* probs);
void launch_causal_softmax_backward_lowp(cudaStream_t stream, Precision p, const lowp16* probs, const lowp16* dprobs,
                                         int batch_heads, int seq_len, float scale, lowp16* dscores);
// cuda_attention_decode.cu: one block per (new position, head); its
// dynamic shared memory holds the row's past_len + new_len FP32 scores,
// so the visible length is bounded (attention_decode_max_positions).
int attention_decode_max_positions();
void launch_attention_decode_lowp(cudaStream_t stream, Precision p, const lowp16* q, int q_stride,
                                  const lowp16* k_cache, const lowp16* v_cache, int kv_stride, int heads, int head_size,
                                  int past_len, int new_len, float scale, lowp16* out, int out_stride);

}  // namespace ddp
