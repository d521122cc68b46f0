// gpt_decoder.h: the GPT (gpt_model.h) run one new position at a time for
// generation, with a KV cache: each layer keeps the keys and values of
// the positions it has seen (FP16, on the backend's device, block_size
// positions per layer), so a new token costs one position's forward and
// its attention against the cache (kernels/ops/attention_decode.h,
// attention_decode_lowp), instead of a whole window's forward.
//
// The numbers are the full forward's: the same layers (LayerNorm,
// nn.Linear, the MLP) on the new rows, the same FP16 rounding points in
// the attention, so the last position's logits are those GptModel::forward
// gives at that position of the same context, to the FP32 sums' order: on
// the CPU the attention is bitwise the full path's, and OpenBLAS's GEMMs of
// one row now and then sum in another order than of T rows, so ~1% of the
// logits differ by about an FP16 ulp (tests/trainer/models/
// test_gpt_decoder.cpp states the tolerance).
//
// The context is what sample_bytes (trainer/modes/generation.cpp) feeds the
// no-cache path: the last min(len, block_size) tokens at positions 0..n-1.
// With learned absolute position embeddings a full cache cannot slide (every
// cached position would move), so when a token arrives with the cache full
// the decoder crops as nanoGPT's generate does: it refills the cache from
// the last block_size tokens (the block_size - 1 it kept and the new one)
// at positions 0..block_size-1. Past the context each token therefore costs
// a block_size forward, as without the cache; up to it, one position each.
//
// Not a Model: no backward, no layer hooks. It reads the whole weight table
// (not ZeRO-3's gathered layers).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/buffer.h"
#include "trainer/models/gpt/gpt_config.h"
#include "trainer/models/layers/layer_norm.h"
#include "trainer/models/layers/linear_layer.h"
#include "trainer/models/layers/mlp_block.h"
#include "trainer/params/parameter_registry.h"
#include "trainer/params/tensor_table.h"

namespace ddp {

class GptDecoder {
 public:
  // weights_lowp: the GPT's FP16 weights in gpt_parameters(config)'s
  // registry (the table GptModel::forward takes). The memory it points to
  // must outlive the decoder; the cache holds what those weights gave, so
  // after they change call reset().
  GptDecoder(Backend& backend, const GptConfig& config, const WeightTable& weights_lowp);

  const ParameterRegistry& parameters() const { return registry_; }

  // Forgets every position: the next append starts at position 0.
  void reset();
  // Feeds `tokens` (each in [0, vocab_size), at least one) at the next
  // positions, cropping first as above when they do not fit, and returns
  // the logits of the last one: FP32, the real_vocab classes only (what
  // sample_token takes; the padded classes never win). The reference is
  // valid until the next call.
  const std::vector<float>& append(const std::vector<int32_t>& tokens);
  const std::vector<float>& append(int32_t token) { return append(std::vector<int32_t>{token}); }

  // Positions cached (<= block_size), and their tokens (position order).
  int length() const { return static_cast<int>(tokens_.size()); }
  const std::vector<int32_t>& tokens() const { return tokens_; }

 private:
  // One block's parts that are not shared: its attention's two nn.Linear
  // and its cache.
  struct Layer {
    std::string prefix;  // "transformer.h.<l>."
    LinearLayer c_attn;
    LinearLayer c_proj;
    Buffer<lowp16> k_cache;  // [T, C]: position-major, head h at columns h*hs (as q k v sit in qkv)
    Buffer<lowp16> v_cache;  // [T, C]
  };

  // Runs tokens_[first..] at positions first.. (first = the positions
  // already cached) and fills logits_fp32_.
  void forward_new(int first);
  void block_forward(Layer& layer, int past, int rows);

  Backend& backend_;
  GptConfig config_;
  ParameterRegistry registry_;
  WeightTable weights_lowp_;
  size_t wte_ = 0;  // tensor indices
  size_t wpe_ = 0;
  std::vector<Layer> layers_;
  // One LayerNorm and one MLP serve every block (and ln_f) in turn, bound to
  // the block's tensors before each use: the decoder keeps nothing for a
  // backward, so one set of their buffers is enough.
  LayerNorm norm_;
  MlpBlock mlp_;
  std::vector<int32_t> tokens_;  // the cached positions' tokens
  Buffer<int32_t> token_ids_;    // [T]: the new positions' tokens on the device
  Buffer<lowp16> x_;             // [T, C]: the residual stream of the new rows
  Buffer<lowp16> mid_;           // [T, C]: m = x + attn(ln_1(x))
  Buffer<lowp16> branch_;        // [T, C]: a branch's output before its residual add
  Buffer<lowp16> qkv_;           // [T, 3C]
  Buffer<lowp16> attn_rows_;     // [T, C]: the heads merged, c_proj's input
  Buffer<lowp16> logits_lowp_;   // [vocab_size]: the last row's
  std::vector<lowp16> logits_host_lowp_;
  std::vector<float> logits_fp32_;  // [real_vocab]
};

}  // namespace ddp
