// parameter_registry.cpp
#include "trainer/params/parameter_registry.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "kernels/error.h"

namespace ddp {

size_t ParameterRegistry::add(ParameterTensor t) {
  DDP_REQUIRE(!t.name.empty() && find(t.name) == size(), "ParameterRegistry: empty or repeated tensor name");
  DDP_REQUIRE(!t.shape.empty(), "ParameterRegistry: a tensor needs a shape");
  size_t count = 1;
  for (int64_t d : t.shape) {
    DDP_REQUIRE(d > 0, "ParameterRegistry: every dimension must be positive");
    DDP_REQUIRE(!__builtin_mul_overflow(count, static_cast<size_t>(d), &count), "ParameterRegistry: size overflow");
  }
  if (t.file_stem.empty()) t.file_stem = t.name;
  t.count = count;
  t.offset = (flat_count_ + kAlignElements - 1) / kAlignElements * kAlignElements;
  flat_count_ = t.offset + count;
  parameter_count_ += count;
  index_.emplace(t.name, tensors_.size());
  tensors_.push_back(std::move(t));
  return tensors_.size() - 1;
}

size_t ParameterRegistry::find(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? tensors_.size() : it->second;
}

std::vector<float> ParameterRegistry::pack(const std::vector<float>& flat) const {
  DDP_REQUIRE(flat.size() == flat_count_, "ParameterRegistry::pack: not a flat buffer of this layout");
  std::vector<float> packed;
  packed.reserve(parameter_count_);
  for (const ParameterTensor& t : tensors_)
    packed.insert(packed.end(), flat.begin() + static_cast<std::ptrdiff_t>(t.offset),
                  flat.begin() + static_cast<std::ptrdiff_t>(t.offset + t.count));
  return packed;
}

std::vector<float> ParameterRegistry::unpack(const std::vector<float>& packed) const {
  DDP_REQUIRE(packed.size() == parameter_count_, "ParameterRegistry::unpack: wrong parameter count");
  std::vector<float> flat(flat_count_, 0.0f);
  size_t at = 0;
  for (const ParameterTensor& t : tensors_) {
    std::copy(packed.begin() + static_cast<std::ptrdiff_t>(at),
              packed.begin() + static_cast<std::ptrdiff_t>(at + t.count),
              flat.begin() + static_cast<std::ptrdiff_t>(t.offset));
    at += t.count;
  }
  return flat;
}

std::vector<float> ParameterRegistry::initial_values(uint64_t seed) const {
  std::vector<float> flat(flat_count_, 0.0f);
  std::mt19937_64 rng(seed);
  // Our own uniform from 24 random bits and our own normal from it:
  // std::uniform_real_distribution and std::normal_distribution are
  // implementation-defined, and the same seed must give the same model
  // everywhere.
  auto unit = [&rng] { return static_cast<float>(rng() >> 40) * (1.0f / 16777216.0f); };  // [0, 1)
  auto normal = [&unit] {                                 // Box-Muller, one value per pair of draws
    const double u1 = 1.0 - static_cast<double>(unit());  // (0, 1]: log is finite
    const double u2 = unit();
    return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  };
  std::vector<size_t> order(tensors_.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [this](size_t a, size_t b) { return tensors_[a].init_order < tensors_[b].init_order; });
  for (size_t i : order) {
    const ParameterTensor& t = tensors_[i];
    float* dst = flat.data() + t.offset;
    for (size_t j = 0; j < t.count; ++j) {
      switch (t.init.kind) {
        case ParameterInit::Kind::Zeros:
          dst[j] = 0.0f;
          break;
        case ParameterInit::Kind::Ones:
          dst[j] = 1.0f;
          break;
        case ParameterInit::Kind::Uniform:
          dst[j] = (2.0f * unit() - 1.0f) * t.init.scale;
          break;
        case ParameterInit::Kind::Normal:
          dst[j] = normal() * t.init.scale;
          break;
      }
    }
  }
  return flat;
}

void register_linear_parameters(ParameterRegistry& registry, const std::string& prefix, int64_t in, int64_t out,
                                int init_order, const std::string& file_stem_prefix) {
  const ParameterInit init = ParameterInit::uniform(1.0f / std::sqrt(static_cast<float>(in)));
  ParameterTensor w;
  w.name = prefix + ".weight";
  w.shape = {out, in};
  w.init = init;
  w.init_order = init_order;
  w.file_stem = file_stem_prefix.empty() ? std::string() : file_stem_prefix + ".weight";
  ParameterTensor b;
  b.name = prefix + ".bias";
  b.shape = {out};
  b.init = init;
  b.init_order = init_order + 1;
  b.file_stem = file_stem_prefix.empty() ? std::string() : file_stem_prefix + ".bias";
  // No decay on biases (AdamW; nanoGPT's rule: only tensors of 2 or more
  // dimensions decay). SGD ignores the flag (mixed_precision_optimizer.h).
  b.weight_decay = false;
  registry.add(std::move(w));
  registry.add(std::move(b));
}

}  // namespace ddp
