// parameter_store.cpp
#include "trainer/params/parameter_store.h"

#include <algorithm>
#include <cstddef>

#include "kernels/error.h"
#include "kernels/ops/elementwise.h"

namespace ddp {

ParameterStore::ParameterStore(Backend& backend, const ParameterRegistry& registry)
    : ParameterStore(backend, registry, ShardRange{0, registry.flat_count()}, Sharding{}) {}

ParameterStore::ParameterStore(Backend& backend, const ParameterRegistry& registry, ShardRange owned, Sharding sharding)
    : master_weights_fp32(backend, owned.count()),
      weights_lowp(backend, sharding.weights ? owned.count() : registry.flat_count()),
      momentum_fp32(backend, owned.count()),
      grads_lowp(backend, sharding.grads ? owned.count() : registry.flat_count()),
      grads_fp32(backend, owned.count()),
      registry_(registry),
      owned_(owned),
      sharding_(sharding) {
  DDP_REQUIRE(owned.begin <= owned.end && owned.end <= registry.flat_count(),
              "ParameterStore: the owned range is not a range of the layout");
  DDP_REQUIRE(sharding.state || owned.count() == registry.flat_count(), "ParameterStore: a range without sharding");
  DDP_REQUIRE(sharding.state || !(sharding.grads || sharding.weights), "ParameterStore: FP16 sharded, FP32 whole");
  // The padding between tensors must hold zeros in every buffer
  // (parameter_registry.h); the masters get theirs from set_master_weights.
  master_weights_fp32.zero();
  weights_lowp.zero();
  momentum_fp32.zero();
  grads_lowp.zero();
  grads_fp32.zero();
}

void ParameterStore::allocate_adamw_state() {
  if (weight_decay_mask.count() == owned_count() && owned_count() > 0) return;
  Backend& backend = weights_lowp.backend();
  second_moment_fp32 = Buffer<float>(backend, owned_count());
  second_moment_fp32.zero();
  std::vector<uint8_t> mask(count(), 0);  // padding: 0 (nothing lives there)
  for (const ParameterTensor& t : registry_.tensors())
    std::fill(mask.begin() + static_cast<std::ptrdiff_t>(t.offset),
              mask.begin() + static_cast<std::ptrdiff_t>(t.offset + t.count), t.weight_decay ? 1 : 0);
  weight_decay_mask = Buffer<uint8_t>(backend, owned_count());
  weight_decay_mask.upload(mask.data() + owned_.begin, owned_count());
}

void ParameterStore::upload_owned(Buffer<float>& state, const std::vector<float>& flat) {
  DDP_REQUIRE(flat.size() == count(), "ParameterStore: a flat vector of the wrong parameter count");
  DDP_REQUIRE(state.count() == owned_count(), "ParameterStore: not one of the owned FP32 buffers");
  state.upload(flat.data() + owned_.begin, owned_count());
}

void ParameterStore::set_master_weights(const std::vector<float>& flat) {
  upload_owned(master_weights_fp32, flat);
  narrow_masters_to_weights();
}

void ParameterStore::narrow_masters_to_weights() {
  CastFp32ToLowp cast;
  cast.src = master_weights_fp32.data();
  cast.dst = owned_weights_lowp();
  cast.count = owned_count();
  cast_fp32_to_lowp(weights_lowp.backend(), cast);
}

ParameterTables training_tables(ParameterStore& params) {
  const ParameterRegistry& registry = params.registry();
  ParameterTables t;
  t.weights_lowp =
      params.weights_sharded() ? WeightTable(registry.size()) : WeightTable::flat(params.weights_lowp.data(), registry);
  t.grads_lowp =
      params.grads_sharded() ? GradTable(registry.size()) : GradTable::flat(params.grads_lowp.data(), registry);
  return t;
}

}  // namespace ddp
