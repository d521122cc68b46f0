// attention_path.h: --attention explicit|fused|auto, how CausalSelfAttention
// computes softmax(q k^T / sqrt(hs)) v.
//   explicit  the batched GEMMs and the causal softmax over the whole
//             [B, nh, T, T] scores, kept in FP16 for backward (the reference);
//   fused     FlashAttention's tiles (kernels/ops/flash_attention.h:
//             attention_forward_fused_lowp): per query row only the output
//             and its FP32 log-sum-exp are kept, the backward recomputes
//             the probabilities tile by tile. Within an FP16 tolerance of
//             explicit, not its bits;
//   auto      the one measured faster on the run's device: explicit on CPUs
//             (launch/results/2026-12-04-cpu-activation-memory.md: at the
//             GPT-2-shaped CPU model fused was no faster, 424-473 tokens/s
//             against 439-513), explicit on CUDA, where no one has measured
//             them yet. fused is the choice for memory.
// A run setting: never recorded, so a checkpoint resumes with either.
#pragma once

#include <string>

#include "kernels/backend.h"

namespace ddp {

enum class AttentionPath { Auto, Explicit, Fused };

// "explicit", "fused", "auto"; throws Error naming the flag for any other.
AttentionPath parse_attention_path(const std::string& text);
std::string attention_path_name(AttentionPath path);
// Auto resolved for the device; Explicit and Fused as given.
AttentionPath resolve_attention_path(AttentionPath path, DeviceKind device);

}  // namespace ddp
