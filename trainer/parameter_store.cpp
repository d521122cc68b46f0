// parameter_store.cpp
#include "trainer/parameter_store.h"

#include <cmath>
#include <random>

#include "kernels/error.h"

namespace ddp {

ParameterLayout ParameterLayout::for_mlp(const std::vector<int64_t>& widths) {
  DDP_REQUIRE(widths.size() >= 2, "an MLP needs at least an input and an output width");
  ParameterLayout layout;
  const size_t n_layers = widths.size() - 1;
  layout.layers.resize(n_layers);
  size_t offset = 0;
  for (size_t r = 0; r < n_layers; ++r) {  // reverse order: last layer first
    const size_t i = n_layers - 1 - r;
    LinearSlices& s = layout.layers[i];
    s.in_features = static_cast<int>(widths[i]);
    s.out_features = static_cast<int>(widths[i + 1]);
    s.weight_offset = offset;
    offset += static_cast<size_t>(s.in_features) * s.out_features;
    s.bias_offset = offset;
    offset += s.out_features;
  }
  layout.total_count = offset;
  return layout;
}

ParameterStore::ParameterStore(Backend& backend, const ParameterLayout& layout)
    : master_weights_fp32(backend, layout.total_count),
      weights_fp16(backend, layout.total_count),
      momentum_fp32(backend, layout.total_count),
      grads_fp16(backend, layout.total_count),
      grads_fp32(backend, layout.total_count),
      layout_(layout) {
  momentum_fp32.zero();
  grads_fp16.zero();
}

void ParameterStore::set_master_weights(const std::vector<float>& host) {
  DDP_REQUIRE(host.size() == count(), "set_master_weights: wrong parameter count");
  master_weights_fp32.upload(host);
  master_weights_fp32.backend().cast_fp32_to_fp16(master_weights_fp32.data(), weights_fp16.data(), count());
}

std::vector<float> init_linear_parameters(const ParameterLayout& layout, uint64_t seed) {
  std::vector<float> params(layout.total_count);
  std::mt19937_64 rng(seed);
  // Our own uniform from 24 random bits: std::uniform_real_distribution is
  // implementation-defined, and the same seed must give the same model
  // everywhere.
  auto uniform = [&rng](float bound) {
    const float u = static_cast<float>(rng() >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    return (2.0f * u - 1.0f) * bound;
  };
  for (const LinearSlices& s : layout.layers) {  // forward order, so layer 0 draws first
    const float bound = 1.0f / std::sqrt(static_cast<float>(s.in_features));
    const size_t w_count = static_cast<size_t>(s.in_features) * s.out_features;
    for (size_t j = 0; j < w_count; ++j) params[s.weight_offset + j] = uniform(bound);
    for (int j = 0; j < s.out_features; ++j) params[s.bias_offset + j] = uniform(bound);
  }
  return params;
}

}  // namespace ddp
