// checkpoint_v2.cpp: checkpoint format version 2 (checkpoint_v2.h):
// encoding, the validating read, and the header alone.
#include "trainer/checkpoint/checkpoint_v2.h"

#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <map>
#include <set>

#include "trainer/io/safetensors.h"
#include "trainer/io/data_error.h"
#include "trainer/tokenizer/tokenizer_kind.h"

namespace ddp {
namespace {

constexpr const char* kVersionKey = "ddp_train.checkpoint";
constexpr const char* kChecksumKey = "crc32";
constexpr const char* kSettingPrefix = "optimizer.";

// Every key a v2 file's metadata has, besides the optimizer.<flag> settings.
const char* const kKeys[] = {"format",
                             "ddp_train.checkpoint",
                             "model",
                             "model_dims",
                             "tokenizer",
                             "activation",
                             "loss",
                             "optimizer",
                             "optimizer_steps",
                             "precision",
                             "momentum_initialized",
                             "loss_scale",
                             "growth_tracker",
                             "hysteresis_left",
                             "step",
                             "epoch",
                             "epoch_sample_offset",
                             "skipped_steps",
                             "seed",
                             "run_id",
                             "train_samples",
                             "global_batch",
                             "tensor_bytes",
                             "crc32"};

// Which tensor prefixes an optimizer's state has, and the buffer each fills.
struct Role {
  const char* prefix;
  std::vector<float> TrainState::*values;
};
std::vector<Role> roles_of(const std::string& optimizer) {
  std::vector<Role> roles = {{"", &TrainState::master_weights_fp32}};
  if (optimizer == "sgd") roles.push_back({"optim.momentum.", &TrainState::momentum_fp32});
  if (optimizer == "adamw") {
    roles.push_back({"optim.exp_avg.", &TrainState::momentum_fp32});
    roles.push_back({"optim.exp_avg_sq.", &TrainState::second_moment_fp32});
  }
  return roles;
}

uint64_t read_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::string dims_csv(const std::vector<int64_t>& dims) {
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s;
}

std::string double_text(double v) {
  char text[40];
  const auto result = std::to_chars(text, text + sizeof text, v);
  return std::string(text, result.ptr);
}

// The CRC-32 that covers everything in the file but itself: each tensor's
// name, shape and offsets in buffer order, every other metadata entry
// (sorted by key: std::map), then the byte buffer. Fields are separated by
// bytes no name or number contains, so no two different files hash the
// same text by shifting a boundary.
uint32_t checksum_of(const std::vector<SafetensorsTensor>& tensors, const std::map<std::string, std::string>& metadata,
                     const uint8_t* buffer, size_t buffer_bytes) {
  std::string table;
  for (const SafetensorsTensor& t : tensors) {
    table += t.name + '\0' + safetensors_dtype_name(t.dtype) + '\0' + dims_csv(t.shape) + '\0' +
             std::to_string(t.begin_byte) + ',' + std::to_string(t.end_byte) + '\n';
  }
  for (const auto& [key, value] : metadata)
    if (key != kChecksumKey) table += key + '\0' + value + '\n';
  uLong crc = crc32(0L, Z_NULL, 0);
  crc = crc32(crc, reinterpret_cast<const Bytef*>(table.data()), static_cast<uInt>(table.size()));
  while (buffer_bytes > 0) {  // zlib takes 32-bit lengths; a large model's buffer exceeds them
    const uInt chunk = static_cast<uInt>(std::min<size_t>(buffer_bytes, 1u << 30));
    crc = crc32(crc, buffer, chunk);
    buffer += chunk;
    buffer_bytes -= chunk;
  }
  return static_cast<uint32_t>(crc);
}

std::string hex32(uint32_t v) {
  char text[9];
  for (int i = 7; i >= 0; --i, v >>= 4) text[i] = "0123456789abcdef"[v & 15];
  text[8] = '\0';
  return text;
}

// A DataError of the safetensors reader as a checkpoint problem (its text
// without the file name, which CheckpointError puts back).
std::string problem_of(const DataError& e, const std::string& name) {
  const std::string text = e.what();
  const std::string prefix = name + ": ";
  return text.compare(0, prefix.size(), prefix) == 0 ? text.substr(prefix.size()) : text;
}

// ---- metadata -> TrainState ------------------------------------------------------

class MetadataReader {
 public:
  MetadataReader(const std::map<std::string, std::string>& metadata, const std::string& name)
      : m_(metadata), name_(name) {}

  const std::string& text(const char* key) const {
    const auto it = m_.find(key);
    if (it == m_.end()) fail(std::string("no ") + key + " in __metadata__");
    return it->second;
  }
  template <typename Int>
  Int integer(const char* key) const {
    const std::string& t = text(key);
    Int v{};
    const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (t.empty() || ec != std::errc() || end != t.data() + t.size())
      fail(std::string(key) + " is " + quote_excerpt(t) + " (not an integer in range)");
    return v;
  }
  double real(const char* key) const {
    const std::string& t = text(key);
    double v = 0.0;
    const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (t.empty() || ec != std::errc() || end != t.data() + t.size())
      fail(std::string(key) + " is " + quote_excerpt(t) + " (not a number)");
    return v;
  }
  std::vector<int64_t> dims(const char* key) const {
    const std::string& t = text(key);
    std::vector<int64_t> out;
    const char* p = t.data();
    const char* last = t.data() + t.size();
    while (p < last) {
      int64_t v = 0;
      const auto [end, ec] = std::from_chars(p, last, v);
      if (ec != std::errc() || (end != last && *end != ',') || (end + 1 == last && *end == ','))
        fail(std::string(key) + " is " + quote_excerpt(t) + " (not a comma-separated list of integers)");
      out.push_back(v);
      p = end + (end == last ? 0 : 1);
    }
    return out;
  }
  [[noreturn]] void fail(const std::string& problem) const {
    throw CheckpointError(name_, "corrupt header: " + problem);
  }

 private:
  const std::map<std::string, std::string>& m_;
  const std::string& name_;
};

TrainState decode_metadata(const std::map<std::string, std::string>& metadata, const std::string& name) {
  const MetadataReader r(metadata, name);
  for (const auto& entry : metadata) {
    const std::string& key = entry.first;
    const bool known = std::any_of(std::begin(kKeys), std::end(kKeys), [&](const char* k) { return key == k; });
    if (!known && key.compare(0, std::strlen(kSettingPrefix), kSettingPrefix) != 0)
      r.fail("unknown __metadata__ key " + quote_excerpt(key));
  }
  TrainState s;
  s.format_version = kCheckpointV2FormatVersion;
  s.model_kind = r.text("model");
  s.model_dims = r.dims("model_dims");
  s.activation = r.text("activation");
  // Optional: written only where the run knew its tokenizer.
  if (metadata.count("tokenizer") > 0) {
    s.tokenizer = r.text("tokenizer");
    if (tokenizer_vocab_size(s.tokenizer) == 0)
      r.fail("tokenizer is " + quote_excerpt(s.tokenizer) + " (not bytes or gpt2)");
  }
  s.loss = r.text("loss");
  s.optimizer = r.text("optimizer");
  // Optional: files before --precision trained in fp16.
  if (metadata.count("precision") > 0) {
    s.precision = r.text("precision");
    if (s.precision != "fp16" && s.precision != "bf16")
      r.fail("precision is " + quote_excerpt(s.precision) + " (must be fp16 or bf16)");
  }
  if (s.optimizer != "sgd" && s.optimizer != "adamw")
    r.fail("optimizer is " + quote_excerpt(s.optimizer) + " (must be sgd or adamw)");
  for (const auto& [key, value] : metadata)
    if (key.compare(0, std::strlen(kSettingPrefix), kSettingPrefix) == 0)
      s.optimizer_settings[key.substr(std::strlen(kSettingPrefix))] = value;
  s.optimizer_steps = r.integer<int64_t>("optimizer_steps");
  const int momentum_flag = r.integer<int>("momentum_initialized");
  if (momentum_flag != 0 && momentum_flag != 1) r.fail("momentum_initialized is " + std::to_string(momentum_flag));
  s.momentum_initialized = momentum_flag == 1;
  s.scaler.scale = r.real("loss_scale");
  s.scaler.growth_tracker = r.integer<int64_t>("growth_tracker");
  s.scaler.hysteresis_left = r.integer<int64_t>("hysteresis_left");
  s.step = r.integer<int64_t>("step");
  s.epoch = r.integer<int64_t>("epoch");
  s.epoch_sample_offset = r.integer<int64_t>("epoch_sample_offset");
  s.skipped_steps = r.integer<int64_t>("skipped_steps");
  s.seed = r.integer<uint64_t>("seed");
  s.run_id = r.integer<uint64_t>("run_id");
  s.train_samples = r.integer<uint64_t>("train_samples");
  s.global_batch = r.integer<int64_t>("global_batch");
  return s;
}

// The tensors of the file into the state's buffers: the parameters are the
// names without "optim.", in buffer order; each optimizer role must hold
// exactly one tensor per parameter, of its shape, and nothing else may be
// there. All F32.
void decode_tensors(const SafetensorsFile& file, TrainState& s, const std::string& name) {
  auto fail = [&](const std::string& problem) { throw CheckpointError(name, "corrupt: " + problem); };
  for (const SafetensorsTensor& t : file.tensors) {
    if (t.dtype != SafetensorsDtype::F32)
      fail("tensor " + quote_excerpt(t.name, 80) + " is " + safetensors_dtype_name(t.dtype) +
           " (checkpoints hold F32)");
    if (t.name.compare(0, 6, "optim.") != 0) s.tensors.push_back({t.name, t.shape});
  }
  const std::vector<Role> roles = roles_of(s.optimizer);
  std::set<std::string> expected;
  for (const Role& role : roles) {
    std::vector<float>& values = s.*role.values;
    for (const StateTensor& p : s.tensors) {
      const std::string tensor_name = role.prefix + p.name;
      expected.insert(tensor_name);
      const SafetensorsTensor* t = file.find(tensor_name);
      if (t == nullptr)
        fail("tensor " + quote_excerpt(tensor_name, 80) + " is missing (a " + s.optimizer +
             " checkpoint has one per parameter tensor)");
      if (t->shape != p.shape)
        fail("tensor " + quote_excerpt(tensor_name, 80) + " has another shape than " + quote_excerpt(p.name, 80));
      const std::vector<float> v = file.values_fp32(*t);
      values.insert(values.end(), v.begin(), v.end());
    }
  }
  for (const SafetensorsTensor& t : file.tensors)
    if (expected.count(t.name) == 0)
      fail("tensor " + quote_excerpt(t.name, 80) + " is not part of a " + s.optimizer + " checkpoint");
}

// The metadata of a v2 file from its first 8 + header size bytes, once it
// is known to be a checkpoint of a version this build reads.
std::map<std::string, std::string> metadata_of(const std::vector<uint8_t>& head, const std::string& name) {
  DDP_REQUIRE(head.size() >= 8 && head.size() - 8 >= read_le64(head.data()), "metadata_of: the whole header");
  if (head.size() > 8 && head[8] != '{') throw CheckpointError(name, "not a ddp_train checkpoint (bad magic)");
  std::map<std::string, std::string> metadata;
  try {
    metadata = parse_safetensors_metadata(head.data(), head.size(), name);
  } catch (const DataError& e) {
    throw CheckpointError(name, "corrupt header: " + problem_of(e, name));
  }
  const auto version = metadata.find(kVersionKey);
  if (version == metadata.end())
    throw CheckpointError(name,
                          "not a ddp_train checkpoint (a safetensors file without ddp_train's training "
                          "state; a weights file goes to --init-weights)");
  if (version->second != std::to_string(kCheckpointV2FormatVersion))
    throw CheckpointError(name, "unsupported checkpoint format version " + quote_excerpt(version->second) +
                                    " (this build reads 1 and 2)");
  return metadata;
}

}  // namespace

std::vector<uint8_t> serialize_checkpoint_v2(const TrainState& s) {
  size_t packed = 0;
  for (const StateTensor& t : s.tensors) {
    size_t n = 1;
    for (int64_t d : t.shape) n *= static_cast<size_t>(d);
    packed += n;
  }
  DDP_REQUIRE(packed == s.master_weights_fp32.size(),
              "serialize_checkpoint_v2: the tensors describe the packed weights");
  // The text fields become JSON strings: the trainer's names are ASCII, and
  // anything else (bytes no name has) is refused rather than mangled.
  auto printable = [](const std::string& t) {
    return std::all_of(t.begin(), t.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
  };
  for (const std::string* text : {&s.model_kind, &s.activation, &s.loss, &s.optimizer, &s.tokenizer, &s.precision})
    if (!printable(*text)) throw Error("checkpoint: a name field holds bytes other than printable ASCII");
  std::vector<SafetensorsTensorOut> out;
  for (const Role& role : roles_of(s.optimizer)) {
    const std::vector<float>& values = s.*role.values;
    DDP_REQUIRE(values.size() == packed, "serialize_checkpoint_v2: every optimizer buffer has the weights' size");
    size_t offset = 0;
    for (const StateTensor& t : s.tensors) {
      size_t n = 1;
      for (int64_t d : t.shape) n *= static_cast<size_t>(d);
      out.push_back({role.prefix + t.name, SafetensorsDtype::F32, t.shape,
                     reinterpret_cast<const uint8_t*>(values.data() + offset), n * sizeof(float)});
      offset += n;
    }
  }
  std::map<std::string, std::string> m;
  m["format"] = "pt";
  m[kVersionKey] = std::to_string(kCheckpointV2FormatVersion);
  m["model"] = s.model_kind;
  m["model_dims"] = dims_csv(s.model_dims);
  m["activation"] = s.activation;
  if (!s.tokenizer.empty()) m["tokenizer"] = s.tokenizer;
  m["loss"] = s.loss;
  m["optimizer"] = s.optimizer;
  for (const auto& [key, value] : s.optimizer_settings) m[kSettingPrefix + key] = value;
  m["optimizer_steps"] = std::to_string(s.optimizer_steps);
  if (!s.precision.empty()) m["precision"] = s.precision;
  m["momentum_initialized"] = s.momentum_initialized ? "1" : "0";
  m["loss_scale"] = double_text(s.scaler.scale);
  m["growth_tracker"] = std::to_string(s.scaler.growth_tracker);
  m["hysteresis_left"] = std::to_string(s.scaler.hysteresis_left);
  m["step"] = std::to_string(s.step);
  m["epoch"] = std::to_string(s.epoch);
  m["epoch_sample_offset"] = std::to_string(s.epoch_sample_offset);
  m["skipped_steps"] = std::to_string(s.skipped_steps);
  m["seed"] = std::to_string(s.seed);
  m["run_id"] = std::to_string(s.run_id);
  m["train_samples"] = std::to_string(s.train_samples);
  m["global_batch"] = std::to_string(s.global_batch);
  size_t buffer_bytes = 0;
  for (const SafetensorsTensorOut& t : out) buffer_bytes += t.byte_count;
  m["tensor_bytes"] = std::to_string(buffer_bytes);
  // The checksum needs the table as a reader sees it: encode once without
  // it, read the table back, then encode the final file.
  std::vector<SafetensorsTensor> table;
  size_t offset = 0;
  for (const SafetensorsTensorOut& t : out) {
    SafetensorsTensor e;
    e.name = t.name;
    e.dtype = t.dtype;
    e.shape = t.shape;
    e.begin_byte = offset;
    e.end_byte = offset + t.byte_count;
    table.push_back(e);
    offset += t.byte_count;
  }
  std::vector<uint8_t> buffer;
  buffer.reserve(buffer_bytes);
  for (const SafetensorsTensorOut& t : out) buffer.insert(buffer.end(), t.bytes, t.bytes + t.byte_count);
  m[kChecksumKey] = hex32(checksum_of(table, m, buffer.data(), buffer.size()));
  return encode_safetensors(out, m);
}

size_t checkpoint_v2_header_bytes(const uint8_t* first8, const std::string& name) {
  const uint64_t n = read_le64(first8);
  if (n > kSafetensorsMaxHeaderBytes) throw CheckpointError(name, "not a ddp_train checkpoint (bad magic)");
  return static_cast<size_t>(n);
}

TrainState decode_checkpoint_header_v2(const std::vector<uint8_t>& head, const std::string& name) {
  return decode_metadata(metadata_of(head, name), name);
}

TrainState parse_checkpoint_v2(std::vector<uint8_t> bytes, const std::string& name) {
  const size_t size = bytes.size();
  auto fail = [&](const std::string& problem) { throw CheckpointError(name, problem); };
  if (size < 8) {
    // A cut v2 file still has the header size's zero high bytes (the cap
    // keeps it below 2^27); anything else was never a checkpoint.
    for (size_t i = 4; i < size; ++i)
      if (bytes[i] != 0) fail("not a ddp_train checkpoint (bad magic)");
    fail(checkpoint_truncated_problem(size));
  }
  const size_t header_bytes = checkpoint_v2_header_bytes(bytes.data(), name);
  if (size > 8 && bytes[8] != '{') fail("not a ddp_train checkpoint (bad magic)");
  if (size - 8 < header_bytes) fail(checkpoint_truncated_problem(size));
  const std::vector<uint8_t> head(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(8 + header_bytes));
  const std::map<std::string, std::string> metadata = metadata_of(head, name);
  TrainState s = decode_metadata(metadata, name);
  const MetadataReader fields(metadata, name);
  const uint64_t tensor_bytes = fields.integer<uint64_t>("tensor_bytes");
  const size_t buffer_bytes = size - 8 - header_bytes;
  if (buffer_bytes < tensor_bytes) fail(checkpoint_truncated_problem(size));
  if (buffer_bytes > tensor_bytes)
    fail(std::to_string(buffer_bytes - tensor_bytes) +
         " unexpected bytes after the end of the checkpoint (file corrupt or appended to)");
  SafetensorsFile file;
  try {
    file = parse_safetensors(std::move(bytes), name);
  } catch (const DataError& e) {
    fail("corrupt: " + problem_of(e, name));
  }
  const std::string& stored = fields.text(kChecksumKey);
  if (stored != hex32(checksum_of(file.tensors, metadata, file.bytes.data() + file.buffer_start, buffer_bytes)))
    fail("checksum mismatch (file corrupt)");
  decode_tensors(file, s, name);
  return s;
}

}  // namespace ddp
