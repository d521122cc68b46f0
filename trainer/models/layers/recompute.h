// recompute.h: how much of the GPT's blocks' forward backward re-runs
// instead of reading it back (--recompute), as plain data a config holds.
// A run setting, never recorded: a checkpoint of one level resumes at any
// other, and every level trains the same bits (the recomputed values are
// the same kernels on the same inputs).
//   None   every block keeps what its backward reads.
//   Light  (llm.c's -r) a block keeps its residual stream (x, m) and its
//          attention's q, k, v, P and merged rows; the LayerNorms' outputs
//          and statistics and the MLP's fc_pre and GELU output live in
//          scratch shared by all blocks: backward re-runs ln_2 and the c_fc
//          GEMM (its fused GELU epilogue, the forward's bits) before the
//          MLP's backward, and ln_1 before the attention's.
//   Block  a block keeps its input x only; backward re-runs ln_1, the
//          attention and the residual add into the shared scratch, then
//          the Light backward.
// What each level holds, in bytes: gpt/gpt_activation_bytes.h.
#pragma once

#include <string>

namespace ddp {

enum class Recompute { None, Light, Block };

Recompute parse_recompute(const std::string& text);  // throws ddp::Error naming --recompute
const char* recompute_name(Recompute level);         // "none" | "light" | "block"

}  // namespace ddp
