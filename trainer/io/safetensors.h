// safetensors.h: the safetensors file format (Hugging Face), read and
// written. A file is
//   8 bytes   N, the header's size, unsigned little-endian
//   N bytes   a JSON object: {name: {"dtype": "F32", "shape": [2, 3],
//             "data_offsets": [begin, end]}, ..., optionally
//             "__metadata__": {string: string}}, possibly padded with spaces
//   the rest  the byte buffer: each tensor's elements, row-major,
//             little-endian, at [begin, end) from the buffer's start
// The reader trusts nothing: the header is parsed by nlohmann::json (no
// hand-written parser) and every field is checked before a byte of the
// buffer is used; tensors must cover the buffer exactly, without holes or
// overlaps, as the reference implementation requires. Only the float dtypes
// this trainer can load are accepted (F32, F16, BF16); any other is refused
// by name. Every problem is a DataError, one line naming the file and, where
// there is one, the tensor:
//   "w.safetensors: tensor 0.weight: data_offsets [0, 10) hold 10 bytes,
//    shape [2, 3] in F32 needs 24"
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ddp {

enum class SafetensorsDtype { F32, F16, BF16 };

const char* safetensors_dtype_name(SafetensorsDtype dtype);  // "F32"
size_t safetensors_dtype_bytes(SafetensorsDtype dtype);      // 4, 2, 2

// The reference implementation's cap on the header (100 MB): a header is a
// few KB per thousand tensors, so a larger N is a corrupt or hostile file.
constexpr size_t kSafetensorsMaxHeaderBytes = 100'000'000;

struct SafetensorsTensor {
  std::string name;
  SafetensorsDtype dtype = SafetensorsDtype::F32;
  std::vector<int64_t> shape;  // [] is a scalar (one element)
  size_t begin_byte = 0;       // data_offsets, relative to the buffer's start
  size_t end_byte = 0;
  size_t count() const;  // elements: the product of shape
};

struct SafetensorsFile {
  std::string name;                             // the file, as errors name it
  std::vector<SafetensorsTensor> tensors;       // in buffer order (by begin_byte)
  std::map<std::string, std::string> metadata;  // "__metadata__", empty when absent
  std::vector<uint8_t> bytes;                   // the whole file
  size_t buffer_start = 0;                      // 8 + N: where the byte buffer starts in `bytes`

  // The tensor of that name, or nullptr.
  const SafetensorsTensor* find(const std::string& tensor_name) const;
  // The tensor's elements widened to FP32 (exact for F32, F16 and BF16).
  std::vector<float> values_fp32(const SafetensorsTensor& tensor) const;
};

// Parses and validates a whole file held in memory. DataError naming `name`
// (and the tensor) when the header size is short, above the cap or beyond
// the file; the header is not a JSON object, or has a duplicate name; an
// entry lacks or has extra fields, a dtype outside F32/F16/BF16, a shape of
// other than non-negative integers, data_offsets that are not [begin, end]
// with begin <= end inside the buffer, or a byte count other than the
// shape's; tensors overlap, leave a hole, or do not end at the buffer's end;
// __metadata__ is not an object of strings.
SafetensorsFile parse_safetensors(std::vector<uint8_t> bytes, const std::string& name);

// The header alone of a file whose first `available` bytes are at `bytes`
// (at least 8 + its header size; the caller checks that): its
// __metadata__, empty when absent. The tensor entries are not checked
// (parse_safetensors does); DataError naming `name` when the header is not
// JSON, not an object, has a duplicate name or a bad __metadata__.
std::map<std::string, std::string> parse_safetensors_metadata(const uint8_t* bytes, size_t available,
                                                              const std::string& name);

// Reads `path` within bounds (trainer/io/input_file.h) and parses it.
SafetensorsFile read_safetensors(const std::string& path);

// A tensor to write: its elements' bytes as they are to be stored
// (little-endian, `dtype`, row-major), byte_count of them.
struct SafetensorsTensorOut {
  std::string name;
  SafetensorsDtype dtype = SafetensorsDtype::F32;
  std::vector<int64_t> shape;
  const uint8_t* bytes = nullptr;
  size_t byte_count = 0;
};

// The file's bytes: tensors in the given order, back to back; the header
// lists them in that order and is padded with spaces to a multiple of 8
// bytes, so the buffer starts 8-byte aligned (as the reference writes it).
// Names must be unique and not "__metadata__"; byte counts must match shapes.
std::vector<uint8_t> encode_safetensors(const std::vector<SafetensorsTensorOut>& tensors,
                                        const std::map<std::string, std::string>& metadata);

// encode_safetensors written atomically and durably (atomic_file.h);
// FileWriteError names `what` and `path` on failure.
void write_safetensors(const std::string& path, const std::vector<SafetensorsTensorOut>& tensors,
                       const std::map<std::string, std::string>& metadata, const std::string& what);

}  // namespace ddp
