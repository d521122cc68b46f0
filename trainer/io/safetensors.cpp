// safetensors.cpp: the reader's checks and the writer (format in safetensors.h).
#include "trainer/io/safetensors.h"

#include <sys/stat.h>

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "kernels/error.h"
#include "kernels/half.h"
#include "trainer/io/atomic_file.h"
#include "trainer/io/data_error.h"
#include "trainer/io/input_file.h"

namespace ddp {
namespace {

using Json = nlohmann::json;

// A real header is an object of objects of arrays: depth 3. Deeper nesting
// is refused while parsing, before a hostile "[[[[..." header can build
// millions of nested values.
constexpr int kMaxJsonDepth = 4;

struct TooDeep {};

// Names and dtypes quoted in messages come from the file: cut, so a
// megabyte-long name makes no megabyte-long error (DataError makes it one line).
std::string shown(const std::string& text) { return text.size() <= 80 ? text : text.substr(0, 80) + "..."; }
std::string tensor_label(const std::string& name) { return "tensor " + shown(name); }

// A JSON value as text for a message (invalid UTF-8 replaced, never thrown).
std::string json_text(const nlohmann::json& v) {
  return shown(v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

uint64_t read_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string range_text(size_t begin, size_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + ")";
}

bool dtype_of(const std::string& text, SafetensorsDtype& dtype) {
  const std::pair<const char*, SafetensorsDtype> known[] = {
      {"F32", SafetensorsDtype::F32},
      {"F16", SafetensorsDtype::F16},
      {"BF16", SafetensorsDtype::BF16},
  };
  for (const auto& k : known)
    if (text == k.first) {
      dtype = k.second;
      return true;
    }
  return false;
}

// Parses the header text; DataError on bad JSON, nesting beyond
// kMaxJsonDepth, or a name that appears twice in the top object (nlohmann
// would keep the last silently; the reference refuses such a file).
Json parse_header_json(const std::string& file, const char* first, const char* last) {
  std::set<std::string> names;
  std::string duplicate;
  auto callback = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (depth > kMaxJsonDepth) throw TooDeep{};
    if (event == Json::parse_event_t::key && depth == 1 && duplicate.empty()) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!names.insert(key).second) duplicate = key;
    }
    return true;
  };
  // JSON text holds no raw NUL (a string's control characters are escaped),
  // and nlohmann's parser takes one for the end of its input: a NUL in the
  // padding would otherwise pass (a flipped byte that no checksum covers).
  if (std::find(first, last, '\0') != last)
    throw DataError(file, "header holds a NUL byte at byte " + std::to_string(std::find(first, last, '\0') - first) +
                              " (not JSON text)");
  try {
    Json header = Json::parse(first, last, callback);
    if (!duplicate.empty()) throw DataError(file, "header: " + tensor_label(duplicate) + " appears twice");
    return header;
  } catch (const TooDeep&) {
    throw DataError(file, "header: JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  } catch (const Json::parse_error& e) {
    throw DataError(file, "header is not valid JSON (at byte " + std::to_string(e.byte) + " of the header)");
  } catch (const Json::out_of_range&) {  // a number beyond a double, e.g. 1e400
    throw DataError(file, "header is not valid JSON: a number out of range");
  } catch (const Json::exception&) {  // nothing else is documented for parse; never let one escape as is
    throw DataError(file, "header is not valid JSON");
  }
}

// A JSON value as a size_t, when it is a non-negative integer.
bool as_size(const Json& v, size_t& out) {
  if (!v.is_number_unsigned()) return false;
  const uint64_t u = v.get<uint64_t>();
  if (u > std::numeric_limits<size_t>::max()) return false;
  out = static_cast<size_t>(u);
  return true;
}

SafetensorsTensor parse_entry(const std::string& file, const std::string& name, const Json& entry,
                              size_t buffer_bytes) {
  const std::string label = tensor_label(name);
  auto fail = [&](const std::string& problem) { throw DataError(file, label + ": " + problem); };
  if (!entry.is_object()) fail("not an object {dtype, shape, data_offsets}");
  for (const auto& item : entry.items())
    if (item.key() != "dtype" && item.key() != "shape" && item.key() != "data_offsets")
      fail("unknown field " + quote_excerpt(item.key()));
  for (const char* field : {"dtype", "shape", "data_offsets"})
    if (!entry.contains(field)) fail(std::string("no ") + field);

  SafetensorsTensor t;
  t.name = name;
  const Json& dtype = entry["dtype"];
  if (!dtype.is_string()) fail("dtype is not a string");
  if (!dtype_of(dtype.get_ref<const std::string&>(), t.dtype))
    fail("dtype " + quote_excerpt(dtype.get_ref<const std::string&>()) + " is not supported (F32, F16 or BF16 only)");

  const Json& shape = entry["shape"];
  if (!shape.is_array()) fail("shape is not a list");
  size_t count = 1;
  bool count_overflows = false, has_zero_dim = false;
  for (const Json& dim : shape) {
    size_t d = 0;
    if (!as_size(dim, d) || d > static_cast<size_t>(std::numeric_limits<int64_t>::max()))
      fail("shape " + json_text(shape) + ": dimensions must be non-negative integers");
    t.shape.push_back(static_cast<int64_t>(d));
    if (d == 0)
      has_zero_dim = true;
    else if (count > std::numeric_limits<size_t>::max() / d)
      count_overflows = true;
    count *= d;
  }
  const size_t element_bytes = safetensors_dtype_bytes(t.dtype);
  // A zero dimension makes the product zero whatever overflowed before it;
  // without one, a product that wrapped (even to exactly 0) is refused.
  if (has_zero_dim)
    count = 0;
  else if (count_overflows || count > std::numeric_limits<size_t>::max() / element_bytes)
    fail("shape " + shape_text(t.shape) + " holds more bytes than a file can");

  const Json& offsets = entry["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2 || !as_size(offsets[0], t.begin_byte) ||
      !as_size(offsets[1], t.end_byte))
    fail("data_offsets " + json_text(offsets) + " is not [begin, end] of two non-negative integers");
  if (t.begin_byte > t.end_byte)
    fail("data_offsets [" + std::to_string(t.begin_byte) + ", " + std::to_string(t.end_byte) +
         "] end before they begin");
  if (t.end_byte > buffer_bytes)
    fail("data_offsets " + range_text(t.begin_byte, t.end_byte) + " run past the end of the " +
         std::to_string(buffer_bytes) + "-byte buffer");
  const size_t held = t.end_byte - t.begin_byte;
  if (held != count * element_bytes)
    fail("data_offsets " + range_text(t.begin_byte, t.end_byte) + " hold " + std::to_string(held) + " bytes, shape " +
         shape_text(t.shape) + " in " + safetensors_dtype_name(t.dtype) + " needs " +
         std::to_string(count * element_bytes));
  return t;
}

// The tensors sorted by offset must tile the buffer: each starts where the
// previous ended, the first at 0, the last at the buffer's end.
void check_tiling(const std::string& file, std::vector<SafetensorsTensor>& tensors, size_t buffer_bytes) {
  std::stable_sort(tensors.begin(), tensors.end(), [](const SafetensorsTensor& a, const SafetensorsTensor& b) {
    return a.begin_byte != b.begin_byte ? a.begin_byte < b.begin_byte : a.end_byte < b.end_byte;
  });
  size_t covered = 0;
  const SafetensorsTensor* previous = nullptr;
  for (const SafetensorsTensor& t : tensors) {
    if (t.begin_byte < covered)
      throw DataError(file, tensor_label(t.name) + ": data_offsets " + range_text(t.begin_byte, t.end_byte) +
                                " overlap " + tensor_label(previous->name) + "'s " +
                                range_text(previous->begin_byte, previous->end_byte));
    if (t.begin_byte > covered)
      throw DataError(file, "bytes " + range_text(covered, t.begin_byte) + " of the buffer belong to no tensor (" +
                                (previous ? "after " + tensor_label(previous->name) + ", " : std::string()) +
                                "before " + tensor_label(t.name) + ")");
    covered = t.end_byte;
    previous = &t;
  }
  if (covered != buffer_bytes)
    throw DataError(file, "the buffer holds " + std::to_string(buffer_bytes) + " bytes but the tensors end at " +
                              std::to_string(covered) + " (a truncated or padded file)");
}

std::map<std::string, std::string> parse_metadata(const std::string& file, const Json& metadata) {
  if (!metadata.is_object()) throw DataError(file, "__metadata__ is not an object of strings");
  std::map<std::string, std::string> out;
  for (const auto& item : metadata.items()) {
    if (!item.value().is_string())
      throw DataError(file, "__metadata__ " + quote_excerpt(item.key()) + " is not a string");
    out[item.key()] = item.value().get<std::string>();
  }
  return out;
}

void append_le64(std::vector<uint8_t>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

}  // namespace

const char* safetensors_dtype_name(SafetensorsDtype dtype) {
  switch (dtype) {
    case SafetensorsDtype::F32:
      return "F32";
    case SafetensorsDtype::F16:
      return "F16";
    case SafetensorsDtype::BF16:
      return "BF16";
  }
  return "?";
}

size_t safetensors_dtype_bytes(SafetensorsDtype dtype) { return dtype == SafetensorsDtype::F32 ? 4 : 2; }

size_t SafetensorsTensor::count() const {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

const SafetensorsTensor* SafetensorsFile::find(const std::string& tensor_name) const {
  for (const SafetensorsTensor& t : tensors)
    if (t.name == tensor_name) return &t;
  return nullptr;
}

std::vector<float> SafetensorsFile::values_fp32(const SafetensorsTensor& t) const {
  const uint8_t* p = bytes.data() + buffer_start + t.begin_byte;
  std::vector<float> values(t.count());
  for (size_t i = 0; i < values.size(); ++i) {
    switch (t.dtype) {
      case SafetensorsDtype::F32:
        values[i] = bits_to_float(uint32_t{p[4 * i]} | uint32_t{p[4 * i + 1]} << 8 | uint32_t{p[4 * i + 2]} << 16 |
                                  uint32_t{p[4 * i + 3]} << 24);
        break;
      case SafetensorsDtype::F16:
        values[i] = half_bits_to_float_portable(static_cast<uint16_t>(p[2 * i] | p[2 * i + 1] << 8));
        break;
      case SafetensorsDtype::BF16:  // the top half of an FP32: widening is a shift
        values[i] = bits_to_float((uint32_t{p[2 * i]} | uint32_t{p[2 * i + 1]} << 8) << 16);
        break;
    }
  }
  return values;
}

namespace {

// Every check of parse_safetensors from the file's first bytes (`head`: at
// least 8 + its header size of them, when the size is within the cap and
// the file) and its size: the tensors and metadata, without the buffer.
SafetensorsFile parse_head(const std::vector<uint8_t>& head, size_t file_bytes, const std::string& name) {
  SafetensorsFile f;
  f.name = name;
  if (file_bytes < 8)
    throw DataError(
        name, "not a safetensors file: " + std::to_string(file_bytes) + " bytes, fewer than the 8-byte header size");
  const uint64_t header_bytes = read_le64(head.data());
  if (header_bytes > kSafetensorsMaxHeaderBytes)
    throw DataError(name, "header size " + std::to_string(header_bytes) + " is above the " +
                              std::to_string(kSafetensorsMaxHeaderBytes) + "-byte cap (not a safetensors file?)");
  if (header_bytes > file_bytes - 8)
    throw DataError(name, "header size " + std::to_string(header_bytes) + " runs past the end of the " +
                              std::to_string(file_bytes) + "-byte file (truncated?)");
  DDP_REQUIRE(head.size() >= 8 + header_bytes, "parse_head: the whole header");
  f.buffer_start = 8 + static_cast<size_t>(header_bytes);
  const size_t buffer_bytes = file_bytes - f.buffer_start;
  const char* text = reinterpret_cast<const char*>(head.data() + 8);
  const Json header = parse_header_json(name, text, text + header_bytes);
  if (!header.is_object()) throw DataError(name, "header is JSON but not an object {name: tensor, ...}");

  for (const auto& item : header.items()) {
    if (item.key() == "__metadata__") {
      f.metadata = parse_metadata(name, item.value());
      continue;
    }
    f.tensors.push_back(parse_entry(name, item.key(), item.value(), buffer_bytes));
  }
  check_tiling(name, f.tensors, buffer_bytes);
  return f;
}

// The first 8 + header size bytes of the regular file `path` of
// `file_bytes` (only the 8-byte size where it is beyond the cap or the
// file: parse_head refuses it from those), or none when unreadable.
std::vector<uint8_t> read_head(const std::string& path, size_t file_bytes) {
  const std::vector<uint8_t> size = read_file_head(path, std::min<size_t>(8, file_bytes));
  if (size.size() < 8) return size.size() == file_bytes ? size : std::vector<uint8_t>{};
  const uint64_t header_bytes = read_le64(size.data());
  if (header_bytes > kSafetensorsMaxHeaderBytes || header_bytes > file_bytes - 8) return size;
  std::vector<uint8_t> head = read_file_head(path, 8 + static_cast<size_t>(header_bytes));
  if (head.size() != 8 + header_bytes) head.clear();  // the file shrank meanwhile: the full read says so
  return head;
}

}  // namespace

SafetensorsFile parse_safetensors(std::vector<uint8_t> bytes, const std::string& name) {
  SafetensorsFile f = parse_head(bytes, bytes.size(), name);
  f.bytes = std::move(bytes);
  return f;
}

std::map<std::string, std::string> parse_safetensors_metadata(const uint8_t* bytes, size_t available,
                                                              const std::string& name) {
  DDP_REQUIRE(available >= 8 && read_le64(bytes) <= available - 8, "parse_safetensors_metadata: whole header");
  const char* text = reinterpret_cast<const char*>(bytes + 8);
  const Json header = parse_header_json(name, text, text + read_le64(bytes));
  if (!header.is_object()) throw DataError(name, "header is JSON but not an object {name: tensor, ...}");
  const auto metadata = header.find("__metadata__");
  return metadata == header.end() ? std::map<std::string, std::string>{} : parse_metadata(name, *metadata);
}

SafetensorsFile read_safetensors(const std::string& path) {
  // The header is checked against the file's size before the buffer is
  // read: a file whose header lies (a sparse file of zeros, a buffer longer
  // than its tensors) is one line at once, not after reading gigabytes.
  // Anything but a readable regular file is left to read_input_file.
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
    const std::vector<uint8_t> head = read_head(path, static_cast<size_t>(st.st_size));
    if (!head.empty()) parse_head(head, static_cast<size_t>(st.st_size), path);
  }
  return naming_out_of_memory(
      path, [&] { return parse_safetensors(read_input_file(path, input_limit_bytes(), "safetensors file"), path); });
}

std::vector<uint8_t> encode_safetensors(const std::vector<SafetensorsTensorOut>& tensors,
                                        const std::map<std::string, std::string>& metadata) {
  // ordered_json keeps the header in buffer order, which a reader of the
  // header (a person, or `head -c`) expects.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  size_t offset = 0;
  for (const SafetensorsTensorOut& t : tensors) {
    DDP_REQUIRE(t.name != "__metadata__" && !header.contains(t.name), "safetensors: tensor names unique");
    size_t count = 1;
    for (int64_t d : t.shape) count *= static_cast<size_t>(d);
    DDP_REQUIRE(t.byte_count == count * safetensors_dtype_bytes(t.dtype), "safetensors: bytes match the shape");
    header[t.name] = {{"dtype", safetensors_dtype_name(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.byte_count}}};
    offset += t.byte_count;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::vector<uint8_t> out;
  out.reserve(8 + text.size() + offset);
  append_le64(out, text.size());
  out.insert(out.end(), text.begin(), text.end());
  for (const SafetensorsTensorOut& t : tensors) out.insert(out.end(), t.bytes, t.bytes + t.byte_count);
  return out;
}

void write_safetensors(const std::string& path, const std::vector<SafetensorsTensorOut>& tensors,
                       const std::map<std::string, std::string>& metadata, const std::string& what) {
  write_file_atomic(path, encode_safetensors(tensors, metadata), what);
}

}  // namespace ddp
