// parameter_store.cpp
#include "trainer/models/parameter_store.h"

#include <algorithm>
#include <cstddef>

#include "kernels/error.h"

namespace ddp {

ParameterStore::ParameterStore(Backend& backend, const ParameterRegistry& registry)
    : master_weights_fp32(backend, registry.flat_count()),
      weights_fp16(backend, registry.flat_count()),
      momentum_fp32(backend, registry.flat_count()),
      grads_fp16(backend, registry.flat_count()),
      grads_fp32(backend, registry.flat_count()),
      registry_(registry) {
  // The padding between tensors must hold zeros in every buffer
  // (parameter_registry.h); the masters get theirs from set_master_weights.
  master_weights_fp32.zero();
  weights_fp16.zero();
  momentum_fp32.zero();
  grads_fp16.zero();
  grads_fp32.zero();
}

void ParameterStore::allocate_adamw_state() {
  if (second_moment_fp32.count() == count()) return;
  Backend& backend = master_weights_fp32.backend();
  second_moment_fp32 = Buffer<float>(backend, count());
  second_moment_fp32.zero();
  std::vector<uint8_t> mask(count(), 0);  // padding: 0 (nothing lives there)
  for (const ParameterTensor& t : registry_.tensors())
    std::fill(mask.begin() + static_cast<std::ptrdiff_t>(t.offset),
              mask.begin() + static_cast<std::ptrdiff_t>(t.offset + t.count), t.weight_decay ? 1 : 0);
  weight_decay_mask = Buffer<uint8_t>(backend, count());
  weight_decay_mask.upload(mask);
}

void ParameterStore::set_master_weights(const std::vector<float>& flat) {
  DDP_REQUIRE(flat.size() == count(), "set_master_weights: wrong parameter count");
  master_weights_fp32.upload(flat);
  master_weights_fp32.backend().cast_fp32_to_fp16(master_weights_fp32.data(), weights_fp16.data(), count());
}

}  // namespace ddp
