// weights_io.cpp
#include "trainer/checkpoint/weights_io.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "kernels/error.h"
#include "trainer/checkpoint/hf_gpt2.h"
#include "trainer/checkpoint/weights_dtype.h"
#include "trainer/io/safetensors.h"
#include "trainer/io/data_error.h"
#include "trainer/io/npy_io.h"
#include "trainer/tokenizer/tokenizer_kind.h"

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

// "0.weight [2, 3], 0.bias [2], ..." for a message; the first few only.
std::string model_tensors_text(const ParameterRegistry& registry) {
  std::string s;
  const std::vector<size_t> order = file_order(registry);
  for (size_t k = 0; k < order.size() && k < 6; ++k)
    s += (k ? ", " : "") + registry[order[k]].name + " " + shape_text(registry[order[k]].shape);
  if (order.size() > 6) s += ", ... (" + std::to_string(order.size()) + " in all)";
  return s;
}

std::string shown_name(const std::string& name) { return name.size() <= 80 ? name : name.substr(0, 80) + "..."; }

}  // namespace

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

void require_finite_weights(const std::string& path, const std::string& tensor, const std::vector<float>& values) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (std::isfinite(values[i])) continue;
    throw DataError(path, "tensor " + tensor + ": non-finite value (" + (std::isnan(values[i]) ? "nan" : "inf") +
                              ") at element " + std::to_string(i) + " (counted from 0); weights must be finite");
  }
}

bool is_safetensors_path(const std::string& path) {
  static const std::string kSuffix = ".safetensors";
  return path.size() > kSuffix.size() && path.compare(path.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0;
}

void save_weights(const std::string& path, const ParameterRegistry& registry, const std::vector<float>& flat,
                  const std::string& tokenizer, SafetensorsDtype dtype) {
  if (is_safetensors_path(path)) return save_weights_safetensors(path, registry, flat, tokenizer, dtype);
  DDP_REQUIRE(dtype == SafetensorsDtype::F32, "save_weights: a .npy directory holds FP32 only");
  save_weights_npy(path, registry, flat);
}

std::vector<float> load_weights(const std::string& path, const ParameterRegistry& registry) {
  if (is_hf_gpt2_weights(path)) return load_hf_gpt2_weights(path, registry);
  return is_safetensors_path(path) ? load_weights_safetensors(path, registry) : load_weights_npy(path, registry);
}

void save_weights_safetensors(const std::string& path, const ParameterRegistry& registry,
                              const std::vector<float>& flat, const std::string& tokenizer, SafetensorsDtype dtype) {
  DDP_REQUIRE(flat.size() == registry.flat_count(), "save_weights_safetensors: not a flat buffer of this model");
  std::vector<std::vector<uint8_t>> rounded;  // FP16/BF16 tensors' bytes, held while the file is written
  std::vector<SafetensorsTensorOut> tensors;
  for (const ParameterTensor& t : registry.tensors())
    tensors.push_back(weights_tensor_out(t.name, t.shape, flat.data() + t.offset, t.count, dtype, rounded));
  std::map<std::string, std::string> metadata = {{"format", "pt"}};
  if (!tokenizer.empty()) metadata["tokenizer"] = tokenizer;
  write_safetensors(path, tensors, metadata, "--save-weights");
}

std::string weights_tokenizer(const std::string& path) {
  if (is_hf_gpt2_weights(path)) return read_hf_gpt2_config(path).tokenizer;
  if (!is_safetensors_path(path)) return "";
  // The whole file is read (and checked) for its header: the weights' load reads it again.
  const std::map<std::string, std::string> metadata = read_safetensors(path).metadata;
  const auto it = metadata.find("tokenizer");
  if (it == metadata.end()) return "";
  if (tokenizer_vocab_size(it->second) == 0)
    throw DataError(path, "metadata tokenizer '" + shown_name(it->second) + "' is not bytes or gpt2");
  return it->second;
}

void check_weights_tokenizer(const std::string& path, const std::string& tokenizer) {
  const std::string recorded = weights_tokenizer(path);
  if (recorded.empty() || tokenizer.empty() || recorded == tokenizer) return;
  throw DataError(
      path, "the weights are of a model of " + recorded + " tokens, and this run's data is " + tokenizer + " tokens");
}

std::vector<float> load_weights_safetensors(const std::string& path, const ParameterRegistry& registry) {
  const SafetensorsFile file = read_safetensors(path);
  std::vector<float> flat(registry.flat_count(), 0.0f);
  for (size_t i : file_order(registry)) {
    const ParameterTensor& t = registry[i];
    const SafetensorsTensor* stored = file.find(t.name);
    if (stored == nullptr)
      throw DataError(path,
                      "tensor " + t.name + ": missing (this model's tensors: " + model_tensors_text(registry) + ")");
    if (stored->shape != t.shape)
      throw DataError(path, "tensor " + t.name + ": shape " + shape_text(stored->shape) + ", this model's is " +
                                shape_text(t.shape) + " (another model or --layers?)");
    const std::vector<float> values = file.values_fp32(*stored);
    require_finite_weights(path, t.name, values);
    std::copy(values.begin(), values.end(), flat.begin() + static_cast<std::ptrdiff_t>(t.offset));
  }
  for (const SafetensorsTensor& stored : file.tensors)
    if (registry.find(stored.name) == registry.size())
      throw DataError(path, "tensor " + shown_name(stored.name) +
                                ": not a tensor of this model (its tensors: " + model_tensors_text(registry) + ")");
  return flat;
}

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
