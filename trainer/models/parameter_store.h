// parameter_store.h: the flat parameter buffers every other part works on.
//
// All parameters of the model live in the registry's one flat layout
// (models/parameter_registry.h: named tensors in the order backward
// produces their gradients, each 16-byte aligned). Every buffer below
// shares it, so the optimizer, the unscale/check pass, the all-reduce
// buckets, checkpoints and weight export are single passes with one index.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/buffer.h"
#include "trainer/models/parameter_registry.h"

namespace ddp {

class ParameterStore {
 public:
  ParameterStore(Backend& backend, const ParameterRegistry& registry);

  const ParameterRegistry& registry() const { return registry_; }
  size_t count() const { return registry_.flat_count(); }  // elements of each buffer, padding included

  Buffer<float> master_weights_fp32;  // (P) the weights the optimizer updates
  Buffer<half16> weights_fp16;        // (P) fp16(master), what forward/backward read
  Buffer<float> momentum_fp32;        // (P) SGD momentum, or AdamW's first moment (exp_avg): the same role
  Buffer<half16> grads_fp16;          // (P) loss-scaled gradients, all-reduced in FP16
  Buffer<float> grads_fp32;           // (P) unscaled gradients the optimizer reads
  // AdamW only (empty until allocate_adamw_state): an SGD run pays nothing.
  Buffer<float> second_moment_fp32;   // (P) AdamW's exp_avg_sq
  Buffer<uint8_t> weight_decay_mask;  // (P) 1 on the elements of tensors whose registry flag says decay, else 0

  // Allocates (zeroed) the second moment and builds the decay mask from the
  // registry, once. A per-element mask rather than per-tensor ranges: the
  // step stays one pass with one index over any range of the layout (a
  // shard may start inside a tensor) for 1 byte per parameter, against the
  // 16 the masters and moments already take.
  void allocate_adamw_state();

  // Host <-> store, flat layout: masters (and the FP16 copy re-cast from them).
  void set_master_weights(const std::vector<float>& flat);
  std::vector<float> master_weights() const { return master_weights_fp32.download(); }

 private:
  ParameterRegistry registry_;
};

}  // namespace ddp
