// embedding.h: the GPT's token and position embeddings, forward and
// backward (B = batch, T = seq_len, C = channels). FP32 adds, one rounding
// per 16-bit output; each gradient sum runs over its rows in increasing
// order (CUDA: after a stable sort of the rows by token), so both rows give
// the CPU's bits.
#pragma once

#include <cstdint>

#include "kernels/lowp16.h"
#include "kernels/ops/op_dispatch.h"

namespace ddp {

// out[b*T + t, c] = fp16(wte[tokens[b*T + t], c] + wpe[t, c]). A token
// outside [0, vocab) gives a NaN row (a kernel cannot throw).
struct EmbeddingForward {
  static constexpr const char* kName = "embedding_forward_lowp";
  const int32_t* tokens = nullptr;  // [B*T]
  const lowp16* wte = nullptr;      // [vocab, C]
  const lowp16* wpe = nullptr;      // [>= T, C]
  int batch = 0;
  int seq_len = 0;
  int channels = 0;
  int vocab = 0;
  lowp16* out = nullptr;  // [B*T, C]
};
void embedding_forward_lowp_cpu(CpuBackend& cpu, const EmbeddingForward& op);
void embedding_forward_lowp_cuda(CudaOpContext& cuda, const EmbeddingForward& op);
inline void embedding_forward_lowp(Backend& backend, const EmbeddingForward& op) {
  run_op(backend, op, embedding_forward_lowp_cpu, DDP_CUDA_ROW(embedding_forward_lowp_cuda));
}

// d_wte[v, c] = fp16(sum over rows r with tokens[r] == v of dout[r, c]),
// the FP32 sum in increasing r; rows of tokens that do not occur become 0.
// d_wpe[t, c] = fp16(sum_b dout[b*T + t, c]), in increasing b. With
// accumulate, each sum starts from the 16-bit value already there (FP32
// add, then the one rounding): the GPT's tied LM head writes its weight
// gradient into d_wte with its GEMM first, and this adds the embedding's
// part, so the lm_head part is rounded twice (by the GEMM, then here) and
// the embedding part once. Tokens outside [0, vocab) add nothing.
struct EmbeddingBackward {
  static constexpr const char* kName = "embedding_backward_lowp";
  const int32_t* tokens = nullptr;  // [B*T]
  const lowp16* dout = nullptr;     // [B*T, C]
  int batch = 0;
  int seq_len = 0;
  int channels = 0;
  int vocab = 0;
  lowp16* d_wte = nullptr;  // [vocab, C]
  lowp16* d_wpe = nullptr;  // [>= T, C]
  bool accumulate = false;
};
void embedding_backward_lowp_cpu(CpuBackend& cpu, const EmbeddingBackward& op);
void embedding_backward_lowp_cuda(CudaOpContext& cuda, const EmbeddingBackward& op);
inline void embedding_backward_lowp(Backend& backend, const EmbeddingBackward& op) {
  run_op(backend, op, embedding_backward_lowp_cpu, DDP_CUDA_ROW(embedding_backward_lowp_cuda));
}

}  // namespace ddp
