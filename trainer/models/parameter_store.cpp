// parameter_store.cpp
#include "trainer/models/parameter_store.h"

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

void ParameterStore::set_master_weights(const std::vector<float>& flat) {
  DDP_REQUIRE(flat.size() == count(), "set_master_weights: wrong parameter count");
  master_weights_fp32.upload(flat);
  master_weights_fp32.backend().cast_fp32_to_fp16(master_weights_fp32.data(), weights_fp16.data(), count());
}

}  // namespace ddp
