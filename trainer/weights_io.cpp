// weights_io.cpp
#include "trainer/weights_io.h"

#include <algorithm>
#include <filesystem>

#include "kernels/error.h"
#include "trainer/npy_io.h"

namespace ddp {
namespace {
std::string tensor_path(const std::string& dir, size_t layer, const char* what) {
  return (std::filesystem::path(dir) / ("layer" + std::to_string(layer) + "." + what + ".npy")).string();
}
}  // namespace

std::vector<std::string> weights_npy_paths(const std::string& dir, size_t linear_layers) {
  std::vector<std::string> paths;
  for (size_t i = 0; i < linear_layers; ++i) {
    paths.push_back(tensor_path(dir, i, "weight"));
    paths.push_back(tensor_path(dir, i, "bias"));
  }
  return paths;
}

void save_weights_npy(const std::string& dir, const ParameterLayout& layout, const std::vector<float>& flat) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error("--save-weights: cannot create directory " + dir + ": " + ec.message());
  for (size_t i = 0; i < layout.layers.size(); ++i) {
    const LinearSlices& s = layout.layers[i];
    const size_t out = s.out_features, in = s.in_features;
    save_npy_fp32(tensor_path(dir, i, "weight"), flat.data() + s.weight_offset, {out, in});
    save_npy_fp32(tensor_path(dir, i, "bias"), flat.data() + s.bias_offset, {out});
  }
}

std::vector<float> load_weights_npy(const std::string& dir, const ParameterLayout& layout) {
  std::vector<float> flat(layout.total_count);
  for (size_t i = 0; i < layout.layers.size(); ++i) {
    const LinearSlices& s = layout.layers[i];
    const size_t out = s.out_features, in = s.in_features;
    const std::vector<float> w = load_npy_fp32(tensor_path(dir, i, "weight"), {out, in});
    const std::vector<float> b = load_npy_fp32(tensor_path(dir, i, "bias"), {out});
    std::copy(w.begin(), w.end(), flat.begin() + s.weight_offset);
    std::copy(b.begin(), b.end(), flat.begin() + s.bias_offset);
  }
  return flat;
}

}  // namespace ddp
