// parameter_store.h: the flat parameter buffers every other part works on.
//
// All parameters of the model live in the registry's one flat layout
// (params/parameter_registry.h: named tensors in the order backward
// produces their gradients, each 16-byte aligned). Every buffer below
// shares it, so the optimizer, the unscale/check pass, the all-reduce
// buckets, checkpoints and weight export are single passes with one index.
//
// Sharded (ZeRO, --zero 1): the store owns one contiguous range of the
// layout (comm/shard_layout.h), and the FP32 state (masters, optimizer
// state, unscaled gradients, the decay mask) holds that range only:
// element i of those buffers is element owned().begin + i of the layout.
// The FP16 weights and gradients stay whole at stage 1; stage 2 holds the
// FP16 gradients of the owned range only (shard_grads), stage 3 also the
// FP16 weights (shard_weights): the model reaches the rest through tables
// (tensor_table.h) the trainer points at gathered and staging buffers.
// Unsharded, the range is the whole layout and nothing differs.
#pragma once

#include <cstdint>
#include <vector>

#include "comm/shard_layout.h"
#include "kernels/buffer.h"
#include "trainer/params/parameter_registry.h"
#include "trainer/params/tensor_table.h"

namespace ddp {

class ParameterStore {
 public:
  // What a --zero stage shards (explicit, not read off the buffers' sizes:
  // a rank whose range is the whole layout, or empty, is sharded as the
  // others are, so every rank takes the same branches and collectives).
  struct Sharding {
    bool state = false;    // FP32 masters, optimizer state, FP32 gradients (stage >= 1)
    bool grads = false;    // FP16 gradients (stage >= 2, without accumulation)
    bool weights = false;  // FP16 weights (stage 3)
  };
  // `owned`: the range of the layout the sharded buffers hold.
  ParameterStore(Backend& backend, const ParameterRegistry& registry);
  ParameterStore(Backend& backend, const ParameterRegistry& registry, ShardRange owned, Sharding sharding);

  const ParameterRegistry& registry() const { return registry_; }
  size_t count() const { return registry_.flat_count(); }  // elements of the layout, padding included
  ShardRange owned() const { return owned_; }
  size_t owned_count() const { return owned_.count(); }  // elements of each FP32 buffer (R below)
  bool sharded() const { return sharding_.state; }
  bool grads_sharded() const { return sharding_.grads; }
  bool weights_sharded() const { return sharding_.weights; }
  // Element owned().begin of the FP16 buffers, whole or sharded.
  lowp16* owned_weights_lowp() { return weights_lowp.data() + (weights_sharded() ? 0 : owned_.begin); }
  lowp16* owned_grads_lowp() { return grads_lowp.data() + (grads_sharded() ? 0 : owned_.begin); }

  Buffer<float> master_weights_fp32;  // (R) the weights the optimizer updates
  Buffer<lowp16> weights_lowp;        // (P, R at stage 3) fp16(master), what forward/backward read
  Buffer<float> momentum_fp32;        // (R) SGD momentum, or AdamW's first moment (exp_avg): the same role
  Buffer<lowp16> grads_lowp;  // (P, R from stage 2) loss-scaled gradients, summed in 16 bits (sharded: the owned range)
  // (R) unscaled gradients the optimizer reads; with --grad-reduce-dtype fp32
  // the loss-scaled FP32 sums first, unscaled there in place (grads_lowp is then not summed).
  Buffer<float> grads_fp32;
  // AdamW only (empty until allocate_adamw_state): an SGD run pays nothing.
  Buffer<float> second_moment_fp32;   // (R) AdamW's exp_avg_sq
  Buffer<uint8_t> weight_decay_mask;  // (R) 1 on the elements of tensors whose registry flag says decay, else 0

  // Allocates (zeroed) the second moment and builds the decay mask from the
  // registry, once. A per-element mask rather than per-tensor ranges: the
  // step stays one pass with one index over any range of the layout (a
  // shard may start inside a tensor) for 1 byte per parameter, against the
  // 16 the masters and moments already take.
  void allocate_adamw_state();

  // Host <-> store, flat layout (count() elements): the owned range of
  // `flat` into the masters, re-cast into the owned range of the FP16
  // weights (sharded: the rest of them is the caller's all-gather, or at
  // stage 3 the layers' gathers).
  void set_master_weights(const std::vector<float>& flat);
  // The owned 16-bit weights from the owned FP32 masters (one rounding each).
  void narrow_masters_to_weights();
  // The owned range of a flat host vector into one of the FP32 buffers.
  void upload_owned(Buffer<float>& state, const std::vector<float>& flat);
  // The masters as held: the whole layout unsharded, the owned range sharded.
  std::vector<float> master_weights() const { return master_weights_fp32.download(); }

 private:
  ParameterRegistry registry_;
  ShardRange owned_;
  Sharding sharding_;
};

// The tables a training step reads and writes through: flat over the
// store's whole FP16 buffers; a sharded buffer's entries stay empty until
// the layer hooks point them (trainer/zero/layer_shards.h).
ParameterTables training_tables(ParameterStore& params);

}  // namespace ddp
