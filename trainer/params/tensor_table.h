// tensor_table.h: one device pointer per registry tensor, the way a model
// reaches its FP16 weights and writes its FP16 gradients.
//
// A model used to take one base pointer and add registry[t].offset itself,
// which ties every parameter to one flat buffer. ZeRO stage 3 gathers one
// layer's weights into a small buffer just before that layer runs, and
// stage 2 writes a bucket's gradients into a staging buffer: both need to
// say, per tensor, where it lives now. The table says it; flat() gives the
// plain case (every entry inside one flat buffer, at its registry offset).
//
// The rule for models: read an entry at each use, after the layer hook of
// the layer that reads it (model.h, LayerHooks) has run, and never keep it
// across a hook: a hook may re-point entries (set()) and free what they
// pointed to before.
#pragma once

#include <cstddef>
#include <vector>

#include "kernels/error.h"
#include "kernels/half.h"
#include "trainer/params/parameter_registry.h"

namespace ddp {

// T: lowp16 (gradients, written) or const lowp16 (weights, only read).
template <class T>
class TensorTable {
 public:
  TensorTable() = default;
  explicit TensorTable(size_t tensor_count) : entries_(tensor_count, nullptr) {}

  // Entry i = base + registry[i].offset: every tensor in one flat buffer of
  // registry.flat_count() elements.
  static TensorTable flat(T* base, const ParameterRegistry& registry) {
    DDP_REQUIRE(base != nullptr, "TensorTable::flat: no buffer");
    TensorTable table(registry.size());
    for (size_t i = 0; i < registry.size(); ++i) table.entries_[i] = base + registry[i].offset;
    return table;
  }

  // Where tensor `tensor` lives now ([registry count] elements).
  T* at(size_t tensor) const {
    DDP_REQUIRE(tensor < entries_.size(), "TensorTable: tensor index out of range");
    DDP_REQUIRE(entries_[tensor] != nullptr, "TensorTable: tensor has no buffer");
    return entries_[tensor];
  }
  void set(size_t tensor, T* p) {
    DDP_REQUIRE(tensor < entries_.size(), "TensorTable: tensor index out of range");
    entries_[tensor] = p;
  }
  size_t size() const { return entries_.size(); }

 private:
  std::vector<T*> entries_;  // registry order
};

using WeightTable = TensorTable<const lowp16>;  // FP16 weights forward and backward read
using GradTable = TensorTable<lowp16>;          // FP16 gradients backward writes or adds to

// The two tables of a training step, over the flat buffers of a
// ParameterStore (or any pair of flat buffers in the registry's layout).
struct ParameterTables {
  WeightTable weights_lowp;
  GradTable grads_lowp;
  static ParameterTables flat(const lowp16* weights_lowp, lowp16* grads_lowp, const ParameterRegistry& registry) {
    return {WeightTable::flat(weights_lowp, registry), GradTable::flat(grads_lowp, registry)};
  }
};

}  // namespace ddp
