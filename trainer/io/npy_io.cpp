// npy_io.cpp: .npy parsing, and the FP32 writer/reader used for parameter
// import and export (the two-file data-set loader is data/npy_dataset.cpp).
// Layout: "\x93NUMPY", major, minor, header length (uint16 LE for 1.0,
// uint32 LE for 2.0/3.0), the header dict, then the raw C-order data.
#include "trainer/io/npy_io.h"

#include "trainer/io/atomic_file.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <utility>

#include "trainer/io/data_error.h"
#include "trainer/io/data_file.h"
#include "trainer/io/input_file.h"

namespace ddp {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicBytes = 6;
constexpr size_t kAlign = 64;  // numpy pads magic + length + header to this

struct DtypeInfo {
  const char* descr;
  NpyDtype dtype;
  size_t item_bytes;
};
// '|u1' is what numpy writes for uint8; byte order is meaningless there, so
// '<u1' (hand-written headers) is taken as well.
constexpr DtypeInfo kDtypes[] = {{"<f4", NpyDtype::f4, 4}, {"<f8", NpyDtype::f8, 8}, {"|u1", NpyDtype::u1, 1},
                                 {"<u1", NpyDtype::u1, 1}, {"<i4", NpyDtype::i4, 4}, {"<i8", NpyDtype::i8, 8}};

size_t item_bytes(NpyDtype dtype) {
  for (const DtypeInfo& info : kDtypes) {
    if (info.dtype == dtype) return info.item_bytes;
  }
  return 0;
}

const char* descr_of(NpyDtype dtype) {
  for (const DtypeInfo& info : kDtypes) {
    if (info.dtype == dtype) return info.descr;
  }
  return "?";
}

NpyDtype dtype_from_descr(const std::string& descr, const std::string& name) {
  for (const DtypeInfo& info : kDtypes) {
    if (descr == info.descr) return info.dtype;
  }
  if (!descr.empty() && descr[0] == '>') {
    throw DataError(name, "unsupported dtype " + quote_excerpt(descr) + ": big-endian data is not supported");
  }
  throw DataError(name, "unsupported dtype " + quote_excerpt(descr) + ": expected '<f4', '<f8', '|u1', '<i4' or '<i8'");
}

uint64_t load_le(const uint8_t* p, size_t bytes) {
  uint64_t v = 0;
  for (size_t i = bytes; i-- > 0;) v = v << 8 | p[i];
  return v;
}

void store_le32(uint32_t v, std::vector<uint8_t>& out) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

}  // namespace

std::string npy_dtype_problem(const NpyArray& array, const char* role, const char* expected) {
  return std::string("unsupported dtype '") + descr_of(array.dtype) + "' for " + role + ": expected " + expected;
}

size_t NpyArray::count() const {
  size_t n = 1;
  for (size_t d : shape) n *= d;
  return n;
}

namespace {

// parse_npy without the data copy: the array's dtype and shape, checked
// against the data bytes; returns where the data starts.
size_t parse_npy_layout(const std::vector<uint8_t>& bytes, const std::string& name, NpyArray& array) {
  // An empty vector's data() may be null, which memcmp must not get even for
  // 0 bytes (fuzz_npy, UBSan); an empty file is reported as truncated below.
  const size_t magic_seen = std::min(bytes.size(), kMagicBytes);
  if (magic_seen > 0 && std::memcmp(bytes.data(), kMagic, magic_seen) != 0) {
    throw DataError(name, "bad npy magic: the file does not start with \\x93NUMPY (not a .npy file?)");
  }
  if (bytes.size() < kMagicBytes + 4) {
    throw DataError(name, "truncated npy file: " + std::to_string(bytes.size()) + " bytes, too short for a header");
  }
  const int major = bytes[6], minor = bytes[7];
  if (major < 1 || major > 3) {
    throw DataError(name, "unsupported npy version " + std::to_string(major) + "." + std::to_string(minor) +
                              ": expected 1.0, 2.0 or 3.0 (bad magic?)");
  }
  const size_t length_bytes = major == 1 ? 2 : 4;
  const size_t header_start = 8 + length_bytes;
  if (bytes.size() < header_start) throw DataError(name, "truncated npy header: the header length is cut off");
  const size_t header_bytes = load_le(bytes.data() + 8, length_bytes);
  if (bytes.size() - header_start < header_bytes) {
    throw DataError(name, "truncated npy header: it declares " + std::to_string(header_bytes) + " bytes, file has " +
                              std::to_string(bytes.size() - header_start) + " after the length");
  }
  const std::string text(reinterpret_cast<const char*>(bytes.data() + header_start), header_bytes);
  const NpyHeader header = parse_npy_header(text, name);
  if (header.fortran_order) {
    throw DataError(name, "fortran_order True is not supported: save a C-order array (np.ascontiguousarray)");
  }

  array.dtype = dtype_from_descr(header.descr, name);
  array.shape = header.shape;
  size_t data_bytes = item_bytes(array.dtype);
  bool overflow = false;
  for (size_t d : array.shape) {
    if (d != 0 && data_bytes > std::numeric_limits<size_t>::max() / d) overflow = true;
    data_bytes *= d;
  }
  const size_t data_start = header_start + header_bytes;
  const size_t have = bytes.size() - data_start;
  const std::string need = "shape " + npy_shape_text(array.shape) + " of '" + header.descr + "' needs " +
                           (overflow ? std::string("more than 2^64") : std::to_string(data_bytes));
  if (overflow || have < data_bytes) {
    throw DataError(name, "truncated npy file: " + need + " data bytes, file has " + std::to_string(have));
  }
  if (have > data_bytes) {
    throw DataError(name,
                    "bad npy file: " + need + " data bytes, file has " + std::to_string(have) + " (trailing bytes)");
  }
  return data_start;
}

}  // namespace

NpyArray parse_npy(const std::vector<uint8_t>& bytes, const std::string& name) {
  NpyArray array;
  const size_t data_start = parse_npy_layout(bytes, name, array);
  array.data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(data_start), bytes.end());
  return array;
}

NpyArray parse_npy(std::vector<uint8_t>&& bytes, const std::string& name) {
  NpyArray array;
  const size_t data_start = parse_npy_layout(bytes, name, array);
  bytes.erase(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(data_start));
  array.data = std::move(bytes);
  return array;
}

namespace {

// numpy writes headers of at most a few hundred bytes (and numpy >= 1.24
// refuses to read one over 10000 bytes): 64 KiB of a gzip stream hold any
// real one. Longer or malformed: the limit bounds the stream and the parse
// names the problem.
constexpr size_t kNpyHeadBytes = size_t{64} << 10;

// What a gzipped .npy file may inflate to: magic, length, header, and the
// shape's elements. A header that declares more than the limit is refused
// before anything is inflated.
size_t npy_declared_bytes(const std::vector<uint8_t>& head, const std::string& name, size_t limit) {
  if (head.size() < 10 || std::memcmp(head.data(), kMagic, kMagicBytes) != 0 || head[6] < 1 || head[6] > 3) {
    return limit;
  }
  const size_t header_start = head[6] == 1 ? 10 : 12;
  if (head.size() < header_start) return limit;
  const size_t header_bytes = load_le(head.data() + 8, header_start - 8);
  if (head.size() - header_start < header_bytes) return limit;
  NpyHeader header;
  size_t data_bytes = 0;  // one item's, then the whole array's
  try {
    header =
        parse_npy_header(std::string(reinterpret_cast<const char*>(head.data() + header_start), header_bytes), name);
    data_bytes = item_bytes(dtype_from_descr(header.descr, name));
  } catch (const DataError&) {
    return limit;  // the full parse reports it
  }
  bool overflow = false;
  for (size_t d : header.shape) {
    if (d != 0 && data_bytes > std::numeric_limits<size_t>::max() / d) overflow = true;
    data_bytes *= d;
  }
  if (overflow || data_bytes > limit - header_start - header_bytes) {
    throw InputFileError(name, "npy header says shape " + npy_shape_text(header.shape) + " of " +
                                   quote_excerpt(header.descr) + ", above " + limit_text(limit));
  }
  return header_start + header_bytes + data_bytes;
}

}  // namespace

NpyArray read_npy(const std::string& path) {
  const size_t limit = input_limit_bytes();
  return naming_out_of_memory(path, [&] {
    return parse_npy(read_data_file(path, DeclaredSize{kNpyHeadBytes,
                                                       [&](const std::vector<uint8_t>& head) {
                                                         return npy_declared_bytes(head, path, limit);
                                                       },
                                                       "its npy header"}),
                     path);
  });
}

std::vector<float> npy_values_as_float(const NpyArray& array) {
  if (array.is_integer()) throw Error(std::string("npy_values_as_float: integer dtype ") + descr_of(array.dtype));
  const size_t n = array.count();
  const size_t item = item_bytes(array.dtype);
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t bits = load_le(array.data.data() + i * item, item);
    if (array.dtype == NpyDtype::u1) {
      values[i] = static_cast<float>(bits);
    } else if (array.dtype == NpyDtype::f4) {
      const uint32_t b32 = static_cast<uint32_t>(bits);
      std::memcpy(&values[i], &b32, 4);
    } else {
      double d;
      std::memcpy(&d, &bits, 8);
      values[i] = static_cast<float>(d);
    }
  }
  return values;
}

std::vector<int64_t> npy_values_as_int(const NpyArray& array) {
  if (!array.is_integer()) throw Error(std::string("npy_values_as_int: not an integer dtype ") + descr_of(array.dtype));
  const size_t n = array.count();
  const size_t item = item_bytes(array.dtype);
  std::vector<int64_t> values(n);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t bits = load_le(array.data.data() + i * item, item);
    // Sign-extend i4 through int32; i8 is already 64 bits.
    values[i] = item == 4 ? static_cast<int32_t>(static_cast<uint32_t>(bits)) : static_cast<int64_t>(bits);
  }
  return values;
}

void require_feature_dtype(const NpyArray& array, const std::string& path) {
  if (array.is_integer()) throw DataError(path, npy_dtype_problem(array, "features", "'<f4', '<f8' or '|u1'"));
}

namespace {
// A v1.0 C-order file of `descr` elements, `payload` their little-endian bytes.
void write_npy(const std::string& path, const char* descr, const std::vector<size_t>& shape,
               const std::vector<uint8_t>& payload) {
  // Pad with spaces so magic + version + length + header is a multiple of
  // 64 and the header ends in '\n', as the format asks.
  std::string header = format_npy_header(descr, shape);
  const size_t unpadded = kMagicBytes + 2 + 2 + header.size() + 1;
  header.append((kAlign - unpadded % kAlign) % kAlign, ' ');
  header.push_back('\n');
  if (header.size() > 0xffff) throw DataError(path, "cannot write: npy v1.0 header too long for shape");

  std::vector<uint8_t> bytes(kMagic, kMagic + kMagicBytes);
  bytes.push_back(1);  // version 1.0
  bytes.push_back(0);
  bytes.push_back(static_cast<uint8_t>(header.size() & 0xff));
  bytes.push_back(static_cast<uint8_t>(header.size() >> 8));
  bytes.insert(bytes.end(), header.begin(), header.end());
  bytes.insert(bytes.end(), payload.begin(), payload.end());

  // A temporary file of its own name (".tmp.<pid>", never followed through
  // a link), renamed over `path`: a user's "<path>.tmp" is not touched.
  try {
    write_file_atomic(path, bytes, "npy file");
  } catch (const FileWriteError& e) {
    throw DataError(path, "cannot write: " + e.problem());
  }
}

size_t element_count(const std::vector<size_t>& shape) {
  size_t count = 1;
  for (size_t d : shape) count *= d;
  return count;
}
}  // namespace

void save_npy_fp32(const std::string& path, const float* data, const std::vector<size_t>& shape) {
  const size_t count = element_count(shape);
  std::vector<uint8_t> payload;
  payload.reserve(4 * count);
  for (size_t i = 0; i < count; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &data[i], 4);
    store_le32(bits, payload);
  }
  write_npy(path, "<f4", shape, payload);
}

void save_npy_int64(const std::string& path, const int64_t* data, const std::vector<size_t>& shape) {
  const size_t count = element_count(shape);
  std::vector<uint8_t> payload;
  payload.reserve(8 * count);
  for (size_t i = 0; i < count; ++i) {
    const auto bits = static_cast<uint64_t>(data[i]);
    store_le32(static_cast<uint32_t>(bits), payload);
    store_le32(static_cast<uint32_t>(bits >> 32), payload);
  }
  write_npy(path, "<i8", shape, payload);
}

std::vector<float> load_npy_fp32(const std::string& path, const std::vector<size_t>& expected_shape) {
  const NpyArray array = read_npy(path);
  if (!array.is_float()) {
    throw DataError(path, std::string("unsupported dtype '") + descr_of(array.dtype) + "': expected '<f4' or '<f8'");
  }
  if (array.shape != expected_shape) {
    throw DataError(path, "shape mismatch: file has " + npy_shape_text(array.shape) + ", expected " +
                              npy_shape_text(expected_shape));
  }
  std::vector<float> values = npy_values_as_float(array);
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) {
      throw DataError(path, std::string("non-finite value (") + (std::isnan(values[i]) ? "nan" : "inf") +
                                ") at flat index " + std::to_string(i));
    }
  }
  return values;
}

}  // namespace ddp
