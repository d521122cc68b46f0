// weights_io.cpp
#include "trainer/checkpoint/weights_io.h"

#include <algorithm>
#include <filesystem>

#include "kernels/error.h"
#include "trainer/data/npy_io.h"

namespace ddp {
namespace {
std::string tensor_path(const std::string& dir, const ParameterTensor& t) {
  return (std::filesystem::path(dir) / (t.file_stem + ".npy")).string();
}

std::vector<size_t> shape_of(const ParameterTensor& t) { return {t.shape.begin(), t.shape.end()}; }

// Forward order (the MLP's layer 0 first), as the files were always written.
std::vector<size_t> file_order(const ParameterRegistry& registry) {
  std::vector<size_t> order(registry.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return registry[a].init_order < registry[b].init_order; });
  return order;
}
}  // namespace

std::vector<std::string> weights_npy_paths(const std::string& dir, const ParameterRegistry& registry) {
  std::vector<std::string> paths;
  for (size_t i : file_order(registry)) paths.push_back(tensor_path(dir, registry[i]));
  return paths;
}

void save_weights_npy(const std::string& dir, const ParameterRegistry& registry, const std::vector<float>& flat) {
  DDP_REQUIRE(flat.size() == registry.flat_count(), "save_weights_npy: not a flat buffer of this model");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error("--save-weights: cannot create directory " + dir + ": " + ec.message());
  for (size_t i : file_order(registry)) {
    const ParameterTensor& t = registry[i];
    save_npy_fp32(tensor_path(dir, t), flat.data() + t.offset, shape_of(t));
  }
}

std::vector<float> load_weights_npy(const std::string& dir, const ParameterRegistry& registry) {
  std::vector<float> flat(registry.flat_count(), 0.0f);
  for (size_t i : file_order(registry)) {
    const ParameterTensor& t = registry[i];
    const std::vector<float> values = load_npy_fp32(tensor_path(dir, t), shape_of(t));
    std::copy(values.begin(), values.end(), flat.begin() + static_cast<std::ptrdiff_t>(t.offset));
  }
  return flat;
}

}  // namespace ddp
