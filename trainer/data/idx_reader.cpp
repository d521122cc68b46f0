// idx_reader.cpp: IDX parsing and the (Fashion-)MNIST loader.
#include "trainer/data/idx_reader.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <utility>

#include "trainer/io/data_error.h"
#include "trainer/io/data_file.h"
#include "trainer/io/input_file.h"

namespace ddp {

namespace {

constexpr uint8_t kIdxUnsignedByte = 0x08;

const char* idx_dtype_name(uint8_t dtype) {
  switch (dtype) {
    case 0x08:
      return "unsigned byte";
    case 0x09:
      return "signed byte";
    case 0x0B:
      return "int16";
    case 0x0C:
      return "int32";
    case 0x0D:
      return "float32";
    case 0x0E:
      return "float64";
    default:
      return "unknown";
  }
}

std::string hex_byte(uint8_t b) {
  char text[8];
  std::snprintf(text, sizeof text, "0x%02x", b);
  return text;
}

std::string magic_text(const std::vector<uint8_t>& bytes) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%02x%02x%02x%02x", bytes[0], bytes[1], bytes[2], bytes[3]);
  return text;
}

std::string dims_text(const std::vector<size_t>& dims) {
  std::string text;
  for (size_t i = 0; i < dims.size(); ++i) text += (i ? "x" : "") + std::to_string(dims[i]);
  return text;
}

struct IdxLayout {
  std::vector<size_t> dims;
  size_t data_offset = 0;
};

// The dims and where the data starts; the data itself stays in `bytes`, so
// the loader converts straight from the decompressed buffer (a 47 MB copy
// saved: fresh pages are the dominant cost of loading Fashion-MNIST).
IdxLayout parse_idx_layout(const std::vector<uint8_t>& bytes, const std::string& name) {
  if (bytes.size() < 4) {
    throw DataError(name,
                    "truncated IDX header: " + std::to_string(bytes.size()) + " bytes, less than the 4-byte magic");
  }
  if (bytes[0] != 0 || bytes[1] != 0) {
    throw DataError(name,
                    "bad IDX magic " + magic_text(bytes) + ": the first two bytes must be zero (not an IDX file?)");
  }
  const uint8_t dtype = bytes[2];
  const size_t ndim = bytes[3];
  if (dtype != kIdxUnsignedByte) {
    throw DataError(name, "unsupported IDX dtype " + hex_byte(dtype) + " (" + idx_dtype_name(dtype) +
                              "): only 0x08 (unsigned byte) is supported");
  }
  if (ndim == 0) throw DataError(name, "bad IDX magic " + magic_text(bytes) + ": ndim is 0");
  const size_t header_bytes = 4 + 4 * ndim;
  if (bytes.size() < header_bytes) {
    throw DataError(name, "truncated IDX header: ndim " + std::to_string(ndim) + " needs " +
                              std::to_string(header_bytes) + " header bytes, file has " + std::to_string(bytes.size()));
  }
  IdxLayout array;
  size_t data_bytes = 1;
  bool overflow = false;
  for (size_t d = 0; d < ndim; ++d) {
    const uint8_t* p = bytes.data() + 4 + 4 * d;
    const size_t dim = size_t{p[0]} << 24 | size_t{p[1]} << 16 | size_t{p[2]} << 8 | size_t{p[3]};
    array.dims.push_back(dim);
    if (dim != 0 && data_bytes > std::numeric_limits<size_t>::max() / dim) overflow = true;
    data_bytes *= dim;
  }
  const size_t have = bytes.size() - header_bytes;
  if (overflow || data_bytes > have) {
    throw DataError(name, "truncated IDX file: header says " + dims_text(array.dims) + " = " +
                              (overflow ? std::string("more than 2^64") : std::to_string(data_bytes)) +
                              " bytes of data, file has " + std::to_string(have));
  }
  if (data_bytes < have) {
    throw DataError(name, "bad IDX file: header says " + dims_text(array.dims) + " = " + std::to_string(data_bytes) +
                              " bytes of data, file has " + std::to_string(have) + " (trailing bytes)");
  }
  array.data_offset = header_bytes;
  return array;
}

// What a gzipped IDX file may inflate to: the header (4 + 4 x ndim bytes)
// plus the product of its dims, one byte each. A header cut short or not
// IDX gives the limit (the parse then names what is wrong); one that
// declares more than the limit is refused before anything is inflated.
size_t idx_declared_bytes(const std::vector<uint8_t>& head, const std::string& name, size_t limit) {
  if (head.size() < 4 || head[0] != 0 || head[1] != 0) return limit;
  const size_t ndim = head[3];
  const size_t header_bytes = 4 + 4 * ndim;
  if (head.size() < header_bytes) return limit;
  std::vector<size_t> dims;
  size_t data_bytes = 1;
  bool overflow = false;
  for (size_t d = 0; d < ndim; ++d) {
    const uint8_t* p = head.data() + 4 + 4 * d;
    dims.push_back(size_t{p[0]} << 24 | size_t{p[1]} << 16 | size_t{p[2]} << 8 | size_t{p[3]});
    if (dims.back() != 0 && data_bytes > std::numeric_limits<size_t>::max() / dims.back()) overflow = true;
    data_bytes *= dims.back();
  }
  if (overflow || data_bytes > limit - header_bytes) {
    throw InputFileError(name, "IDX header says " + dims_text(dims) + " = " +
                                   (overflow ? std::string("more than 2^64") : std::to_string(data_bytes)) +
                                   " bytes of data, above " + limit_text(limit));
  }
  return header_bytes + data_bytes;
}

std::vector<uint8_t> read_idx_bytes(const std::string& path) {
  const size_t limit = input_limit_bytes();
  return read_data_file(
      path,
      DeclaredSize{4 + 4 * 255, [&](const std::vector<uint8_t>& head) { return idx_declared_bytes(head, path, limit); },
                   "its IDX header"});
}

}  // namespace

IdxArray parse_idx(const std::vector<uint8_t>& bytes, const std::string& name) {
  IdxLayout layout = parse_idx_layout(bytes, name);
  IdxArray array;
  array.dims = std::move(layout.dims);
  array.data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(layout.data_offset), bytes.end());
  return array;
}

IdxArray read_idx_file(const std::string& path) {
  return naming_out_of_memory(path, [&] { return parse_idx(read_idx_bytes(path), path); });
}

Dataset load_idx_dataset(const std::string& images_path, const std::string& labels_path) {
  const std::vector<uint8_t> image_bytes = read_idx_bytes(images_path);
  const IdxLayout images = parse_idx_layout(image_bytes, images_path);
  if (images.dims.size() != 2 && images.dims.size() != 3) {
    throw DataError(images_path, "unexpected IDX magic for images: ndim " + std::to_string(images.dims.size()) +
                                     ", expected idx3 (N, H, W) or idx2 (N, D)");
  }
  const IdxArray labels = read_idx_file(labels_path);
  if (labels.dims.size() != 1) {
    throw DataError(labels_path, "unexpected IDX magic for labels: ndim " + std::to_string(labels.dims.size()) +
                                     ", expected idx1 (N)");
  }
  const size_t count = images.dims[0];
  if (labels.dims[0] != count) {
    throw DataError(labels_path, "count mismatch: " + std::to_string(labels.dims[0]) + " labels for " +
                                     std::to_string(count) + " images in " + images_path);
  }

  Dataset data;
  data.count = count;
  data.features = images.dims.size() == 3 ? images.dims[1] * images.dims[2] : images.dims[1];
  data.source = "IDX images " + images_path + ", labels " + labels_path;
  // A 256-entry table: b / 255.0f exactly as a division would give, without
  // 47M divisions.
  std::array<float, 256> scale;
  for (int b = 0; b < 256; ++b) scale[b] = static_cast<float>(b) / 255.0f;
  const uint8_t* pixels = image_bytes.data() + images.data_offset;
  const size_t pixel_count = image_bytes.size() - images.data_offset;
  require_within_limit(images_path, pixel_count * sizeof(float), input_limit_bytes(), "the images as FP32 features");
  naming_out_of_memory(images_path, [&] { data.x.resize(pixel_count); });
  for (size_t i = 0; i < data.x.size(); ++i) data.x[i] = scale[pixels[i]];
  data.labels.assign(labels.data.begin(), labels.data.end());
  data.labels_file = labels_path;
  for (int32_t label : data.labels) data.num_classes = std::max(data.num_classes, label + 1);
  validate_dataset(data, images_path);
  return data;
}

Dataset load_fashion_mnist(const std::string& dir, bool train) {
  const std::string prefix = (std::filesystem::path(dir) / (train ? "train" : "t10k")).string();
  // Debian ships the files gzipped; accept an unpacked copy too.
  auto pick = [](const std::string& base) {
    std::error_code ignored;  // an unreadable path is reported by the read
    const std::string gz = base + ".gz";
    return std::filesystem::exists(gz, ignored) || !std::filesystem::exists(base, ignored) ? gz : base;
  };
  Dataset data = load_idx_dataset(pick(prefix + "-images-idx3-ubyte"), pick(prefix + "-labels-idx1-ubyte"));
  data.source = std::string("Fashion-MNIST ") + (train ? "train" : "test") + " (" + dir + ")";
  return data;
}

}  // namespace ddp
