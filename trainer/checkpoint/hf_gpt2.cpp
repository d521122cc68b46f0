// hf_gpt2.cpp
#include "trainer/checkpoint/hf_gpt2.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "kernels/error.h"
#include "kernels/transformer_math.h"
#include "trainer/checkpoint/weights_dtype.h"
#include "trainer/checkpoint/weights_io.h"
#include "trainer/io/atomic_file.h"
#include "trainer/io/data_error.h"
#include "trainer/io/input_file.h"
#include "trainer/io/safetensors.h"
#include "trainer/tokenizer/tokenizer_kind.h"

namespace ddp {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr const char* kPrefix = "transformer.";
constexpr const char* kConfigFile = "config.json";
constexpr const char* kModelFile = "model.safetensors";
constexpr const char* kTokenizerKey = "ddp_train_tokenizer";
constexpr size_t kConfigMaxBytes = size_t{1} << 20;  // a config.json is a few hundred bytes

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

bool is_directory(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec);
}

// Our registry's name for a stored one: "transformer." added where the save lacks it.
std::string registry_name(const std::string& stored) {
  if (stored.compare(0, std::strlen(kPrefix), kPrefix) == 0 || stored == "lm_head.weight") return stored;
  return kPrefix + stored;
}

// The Conv1D weights, stored [in, out].
bool is_conv1d_weight(const std::string& name) {
  for (const char* tail : {".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight", ".mlp.c_proj.weight"})
    if (ends_with(name, tail)) return true;
  return false;
}

// The causal-mask buffers older saves hold: not parameters.
bool is_mask_buffer(const std::string& name) {
  return ends_with(name, ".attn.bias") || ends_with(name, ".attn.masked_bias");
}

// [rows, cols] row-major to [cols, rows].
std::vector<float> transposed(const std::vector<float>& v, int64_t rows, int64_t cols) {
  std::vector<float> out(v.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[static_cast<size_t>(c * rows + r)] = v[static_cast<size_t>(r * cols + c)];
  return out;
}

// config.json's integer `key`, required and positive.
int positive_int(const Json& j, const char* key, const std::string& path) {
  const auto it = j.find(key);
  if (it == j.end()) throw DataError(path, std::string("no ") + key + " (a GPT-2 config.json has one)");
  if (!it->is_number_integer() || it->get<int64_t>() <= 0 || it->get<int64_t>() > (int64_t{1} << 24))
    throw DataError(path, std::string(key) + " is " + it->dump() + ", not a positive integer");
  return static_cast<int>(it->get<int64_t>());
}

// A boolean setting that must have `wanted` (its default where absent).
void require_flag(const Json& j, const char* key, bool wanted, const std::string& path, const std::string& why) {
  const auto it = j.find(key);
  if (it == j.end()) return;
  if (!it->is_boolean() || it->get<bool>() != wanted)
    throw DataError(path, std::string(key) + " " + it->dump() + " is not supported (" + why + ")");
}

HfGpt2Config config_of_directory(const std::string& dir) {
  const std::string path = (fs::path(dir) / kConfigFile).string();
  if (fs::exists(fs::path(dir) / "model.safetensors.index.json"))
    throw DataError(dir,
                    "a sharded save (model.safetensors.index.json) is not supported: save it unsharded "
                    "(save_pretrained(dir, max_shard_size=\"100GB\"))");
  if (!fs::exists(fs::path(dir) / kModelFile)) {
    const bool bin = fs::exists(fs::path(dir) / "pytorch_model.bin");
    throw DataError(
        dir, std::string("no model.safetensors") +
                 (bin ? " (only pytorch_model.bin: save_pretrained(dir, safe_serialization=True) writes one)" : ""));
  }
  const std::string text = read_text_file(path, kConfigMaxBytes, "a Hugging Face config.json");
  const Json j = Json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw DataError(path, "not a JSON object");
  const auto text_of = [&](const char* key, const char* otherwise) {
    const auto it = j.find(key);
    if (it == j.end()) return std::string(otherwise);
    if (!it->is_string()) throw DataError(path, std::string(key) + " is " + it->dump() + ", not a string");
    return it->get<std::string>();
  };
  const std::string model_type = text_of("model_type", "gpt2");
  if (model_type != "gpt2")
    throw DataError(path, "model_type '" + model_type + "' is not gpt2 (ddp_train reads GPT-2's architecture)");
  const std::string activation = text_of("activation_function", "gelu_new");
  // gelu_pytorch_tanh is the same tanh approximation, computed by PyTorch.
  if (activation != "gelu_new" && activation != "gelu_pytorch_tanh")
    throw DataError(path, "activation_function '" + activation +
                              "' is not supported (ddp_train's GPT has GPT-2's tanh GELU, gelu_new)");
  HfGpt2Config g;
  g.source = path;
  g.n_layer = positive_int(j, "n_layer", path);
  g.n_head = positive_int(j, "n_head", path);
  g.n_embd = positive_int(j, "n_embd", path);
  g.n_positions = positive_int(j, "n_positions", path);
  g.vocab_size = positive_int(j, "vocab_size", path);
  if (g.n_embd % g.n_head != 0)
    throw DataError(path,
                    "n_embd " + std::to_string(g.n_embd) + " does not divide by n_head " + std::to_string(g.n_head));
  const auto inner = j.find("n_inner");
  if (inner != j.end() && !inner->is_null() && !(inner->is_number_integer() && inner->get<int64_t>() == 4 * g.n_embd))
    throw DataError(path, "n_inner " + inner->dump() +
                              " is not supported (the MLP is 4 n_embd = " + std::to_string(4 * g.n_embd) + " wide)");
  const auto eps = j.find("layer_norm_epsilon");
  if (eps != j.end() && !(eps->is_number() && std::fabs(eps->get<double>() - kLayerNormEps) <= 1e-12))
    throw DataError(path, "layer_norm_epsilon " + eps->dump() + " is not supported (ddp_train's LayerNorm uses 1e-05)");
  require_flag(j, "tie_word_embeddings", true, path, "the LM head is wte");
  require_flag(j, "add_cross_attention", false, path, "a decoder without an encoder");
  require_flag(j, "scale_attn_weights", true, path, "attention scores are scaled by 1/sqrt(head size)");
  require_flag(j, "scale_attn_by_inverse_layer_idx", false, path, "no per-layer scaling");
  for (const char* key : {"resid_pdrop", "embd_pdrop", "attn_pdrop"}) {
    const auto it = j.find(key);
    if (it != j.end() && it->is_number()) g.dropout = std::max(g.dropout, it->get<double>());
  }
  g.tokenizer = text_of(kTokenizerKey, "");
  if (!g.tokenizer.empty() && tokenizer_vocab_size(g.tokenizer) == 0)
    throw DataError(path, std::string(kTokenizerKey) + " '" + g.tokenizer + "' is not bytes or gpt2");
  if (g.tokenizer.empty() && g.vocab_size == tokenizer_vocab_size(kGpt2Tokenizer)) g.tokenizer = kGpt2Tokenizer;
  return g;
}

// A bare model.safetensors: the shape its tensors imply, all but n_head.
HfGpt2Config config_of_file(const std::string& path) {
  const SafetensorsFile file = read_safetensors(path);
  HfGpt2Config g;
  g.source = path;
  std::set<int> layers;
  for (const SafetensorsTensor& t : file.tensors) {
    const std::string name = registry_name(t.name);
    if (name == "transformer.wte.weight" && t.shape.size() == 2) {
      g.vocab_size = static_cast<int>(t.shape[0]);
      g.n_embd = static_cast<int>(t.shape[1]);
    }
    if (name == "transformer.wpe.weight" && t.shape.size() == 2) g.n_positions = static_cast<int>(t.shape[0]);
    const std::string blocks = "transformer.h.";
    if (name.compare(0, blocks.size(), blocks) == 0) layers.insert(std::atoi(name.c_str() + blocks.size()));
  }
  if (g.vocab_size == 0 || g.n_positions == 0)
    throw DataError(path, "no wte.weight or wpe.weight [rows, C]: not GPT-2 weights");
  g.n_layer = static_cast<int>(layers.size());
  if (g.vocab_size == tokenizer_vocab_size(kGpt2Tokenizer)) g.tokenizer = kGpt2Tokenizer;
  return g;
}

Json config_json(const ParameterRegistry& registry, int n_head, int real_vocab, const std::string& tokenizer,
                 SafetensorsDtype dtype) {
  const ParameterTensor& wte = registry[registry.find("transformer.wte.weight")];
  const ParameterTensor& wpe = registry[registry.find("transformer.wpe.weight")];
  int n_layer = 0;
  while (registry.find("transformer.h." + std::to_string(n_layer) + ".ln_1.weight") < registry.size()) ++n_layer;
  Json j;
  j["architectures"] = Json::array({"GPT2LMHeadModel"});
  j["model_type"] = "gpt2";
  j["activation_function"] = "gelu_new";
  j["n_layer"] = n_layer;
  j["n_head"] = n_head;
  j["n_embd"] = wte.shape[1];
  j["n_positions"] = wpe.shape[0];
  j["n_inner"] = nullptr;
  j["vocab_size"] = real_vocab;
  j["layer_norm_epsilon"] = kLayerNormEps;
  // Trained without dropout: a fine-tuning run in transformers keeps none unless it asks.
  j["resid_pdrop"] = 0.0;
  j["embd_pdrop"] = 0.0;
  j["attn_pdrop"] = 0.0;
  j["initializer_range"] = 0.02;
  j["scale_attn_weights"] = true;
  j["scale_attn_by_inverse_layer_idx"] = false;
  j["reorder_and_upcast_attn"] = false;
  j["tie_word_embeddings"] = true;
  j["use_cache"] = true;
  j["torch_dtype"] = torch_dtype_name(dtype);
  if (tokenizer == kGpt2Tokenizer) {
    j["bos_token_id"] = 50256;
    j["eos_token_id"] = 50256;
  }
  if (!tokenizer.empty()) j[kTokenizerKey] = tokenizer;
  return j;
}

}  // namespace

bool is_hf_gpt2_weights(const std::string& path) {
  if (is_directory(path)) return fs::exists(fs::path(path) / kConfigFile);
  if (!is_safetensors_path(path)) return false;
  const SafetensorsFile file = read_safetensors(path);
  for (const SafetensorsTensor& t : file.tensors) {
    if (t.name == "wte.weight") return true;  // a GPT2Model's save: GPT-2's names without "transformer."
    if (ends_with(t.name, ".attn.c_attn.weight") && t.shape.size() == 2 && t.shape[1] == 3 * t.shape[0]) return true;
  }
  return false;
}

std::string hf_gpt2_model_file(const std::string& path) {
  return is_directory(path) ? (fs::path(path) / kModelFile).string() : path;
}

HfGpt2Config read_hf_gpt2_config(const std::string& path) {
  return is_directory(path) ? config_of_directory(path) : config_of_file(path);
}

void check_hf_gpt2_vocab(const std::string& path, int real_vocab) {
  const HfGpt2Config hf = read_hf_gpt2_config(path);
  if (hf.vocab_size != real_vocab)
    throw DataError(hf.source, "vocabulary " + std::to_string(hf.vocab_size) + ", and this run's data has " +
                                   std::to_string(real_vocab) + " tokens (another tokenizer?)");
}

std::vector<float> load_hf_gpt2_weights(const std::string& path, const ParameterRegistry& registry) {
  const std::string model_file = hf_gpt2_model_file(path);
  const SafetensorsFile file = read_safetensors(model_file);
  std::vector<float> flat(registry.flat_count(), 0.0f);
  std::vector<bool> loaded(registry.size(), false);
  const SafetensorsTensor* lm_head = nullptr;
  for (const SafetensorsTensor& stored : file.tensors) {
    if (is_mask_buffer(stored.name)) continue;
    if (stored.name == "lm_head.weight") {
      lm_head = &stored;
      continue;
    }
    const std::string name = registry_name(stored.name);
    const size_t index = registry.find(name);
    if (index == registry.size())
      throw DataError(model_file, "tensor " + stored.name + ": not a tensor of GPT-2 (or not of this model's " +
                                      std::to_string(registry.size()) + " tensors)");
    // "h.0.ln_1.weight" and "transformer.h.0.ln_1.weight" are one tensor: which one to load would be a guess.
    if (loaded[index])
      throw DataError(model_file, "tensor " + stored.name + ": " + name +
                                      " is stored twice, with and without the 'transformer.' prefix");
    const ParameterTensor& t = registry[index];
    std::vector<float> values = file.values_fp32(stored);
    require_finite_weights(model_file, stored.name, values);
    std::vector<int64_t> shape = stored.shape;
    if (is_conv1d_weight(name) && shape.size() == 2) {
      values = transposed(values, shape[0], shape[1]);
      std::swap(shape[0], shape[1]);
    }
    const bool table = name == "transformer.wte.weight" || name == "transformer.wpe.weight";
    if (table && shape.size() == 2 && shape[1] == t.shape[1]) {
      // wte: its rows, the padding zero; wpe: the first block_size rows.
      const bool is_wte = name == "transformer.wte.weight";
      if (is_wte && shape[0] > t.shape[0])
        throw DataError(model_file, "tensor " + stored.name + ": vocabulary " + std::to_string(shape[0]) +
                                        ", above this model's " + std::to_string(t.shape[0]));
      if (!is_wte && shape[0] < t.shape[0])
        throw DataError(model_file, "tensor " + stored.name + ": " + std::to_string(shape[0]) +
                                        " positions (n_positions), fewer than this model's context " +
                                        std::to_string(t.shape[0]) + " (--block-size)");
      const size_t count = static_cast<size_t>(std::min(shape[0], t.shape[0]) * t.shape[1]);
      std::copy(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(count),
                flat.begin() + static_cast<std::ptrdiff_t>(t.offset));
    } else {
      if (shape != t.shape)
        throw DataError(model_file, "tensor " + stored.name + ": shape " + shape_text(stored.shape) +
                                        (is_conv1d_weight(name) ? " (Conv1D, [in, out])" : "") + ", this model's is " +
                                        shape_text(t.shape) + (is_conv1d_weight(name) ? " as nn.Linear" : ""));
      std::copy(values.begin(), values.end(), flat.begin() + static_cast<std::ptrdiff_t>(t.offset));
    }
    loaded[index] = true;
  }
  for (size_t i = 0; i < registry.size(); ++i)
    if (!loaded[i]) throw DataError(model_file, "tensor " + registry[i].name + ": missing");
  if (lm_head != nullptr) {
    // Tied: the head must be wte itself (a save of the tied model writes it equal, or not at all).
    const ParameterTensor& wte = registry[registry.find("transformer.wte.weight")];
    const std::vector<float> head = file.values_fp32(*lm_head);
    const size_t rows = lm_head->shape.empty() ? 0 : static_cast<size_t>(lm_head->shape[0]);
    const bool same = lm_head->shape.size() == 2 && lm_head->shape[1] == wte.shape[1] &&
                      rows <= static_cast<size_t>(wte.shape[0]) &&
                      std::equal(head.begin(), head.end(), flat.begin() + static_cast<std::ptrdiff_t>(wte.offset));
    if (!same)
      throw DataError(model_file,
                      "tensor lm_head.weight: not equal to wte.weight (an untied LM head; ddp_train's "
                      "GPT ties it to the embedding)");
  }
  return flat;
}

void save_hf_gpt2(const std::string& dir, const ParameterRegistry& registry, const std::vector<float>& flat, int n_head,
                  int real_vocab, const std::string& tokenizer, SafetensorsDtype dtype) {
  DDP_REQUIRE(flat.size() == registry.flat_count(), "save_hf_gpt2: a flat buffer of this model");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error("--save-weights: cannot create directory " + dir + ": " + ec.message());
  // The transposed Conv1D weights, and the FP16/BF16 tensors' bytes, are
  // held here while the file is written.
  std::vector<std::vector<float>> transposed_store;
  transposed_store.reserve(registry.size());
  std::vector<std::vector<uint8_t>> rounded;
  std::vector<SafetensorsTensorOut> tensors;
  for (const ParameterTensor& t : registry.tensors()) {
    const float* values = flat.data() + t.offset;
    std::vector<int64_t> shape = t.shape;
    size_t count = t.count;
    if (is_conv1d_weight(t.name)) {
      transposed_store.push_back(transposed(std::vector<float>(values, values + t.count), t.shape[0], t.shape[1]));
      values = transposed_store.back().data();
      std::swap(shape[0], shape[1]);
    }
    if (t.name == "transformer.wte.weight") {
      shape[0] = real_vocab;  // the padding rows cut
      count = static_cast<size_t>(real_vocab * t.shape[1]);
    }
    tensors.push_back(weights_tensor_out(t.name, shape, values, count, dtype, rounded));
  }
  const std::vector<std::string> files = hf_gpt2_output_files(dir);
  write_safetensors(files[1], tensors, {{"format", "pt"}}, "--save-weights");
  const std::string text = config_json(registry, n_head, real_vocab, tokenizer, dtype).dump(2) + "\n";
  write_file_atomic(files[0], std::vector<uint8_t>(text.begin(), text.end()), "--save-weights");
}

std::vector<std::string> hf_gpt2_output_files(const std::string& dir) {
  return {(fs::path(dir) / kConfigFile).string(), (fs::path(dir) / kModelFile).string()};
}

}  // namespace ddp
