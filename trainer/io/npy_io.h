// npy_io.h: NumPy .npy files (format versions 1.0, 2.0 and 3.0): parsing,
// and FP32 parameter arrays for --init-weights and export (data sets of two
// files are data/npy_dataset.h). Little-endian dtypes only: '<f4', '<f8' and
// '|u1' are read as values (u1 is not scaled), '<i4' and '<i8' as labels.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trainer/io/npy_header.h"

namespace ddp {

enum class NpyDtype { f4, f8, u1, i4, i8 };

struct NpyArray {
  NpyDtype dtype = NpyDtype::f4;
  std::vector<size_t> shape;
  std::vector<uint8_t> data;  // product(shape) elements, little-endian, as stored

  size_t count() const;
  bool is_float() const { return dtype == NpyDtype::f4 || dtype == NpyDtype::f8; }
  bool is_integer() const { return dtype == NpyDtype::i4 || dtype == NpyDtype::i8; }
};

// Parses a whole .npy file. DataError naming `name` on a bad magic or
// version, a malformed header, fortran_order True, an unsupported dtype, or
// fewer (or more) data bytes than the shape needs.
NpyArray parse_npy(const std::vector<uint8_t>& bytes, const std::string& name);
// The same, taking the file's buffer as the array's data (no second copy
// of a file that may be most of memory).
NpyArray parse_npy(std::vector<uint8_t>&& bytes, const std::string& name);
NpyArray read_npy(const std::string& path);

// Element values widened: floats for f4/f8/u1 (exact for f4 and u1; f8
// rounded to nearest), int64 for i4/i8. Throws Error for the other kind.
std::vector<float> npy_values_as_float(const NpyArray& array);
std::vector<int64_t> npy_values_as_int(const NpyArray& array);

// "unsupported dtype '<i4' for ROLE: expected EXPECTED", the words every
// dtype refusal uses.
std::string npy_dtype_problem(const NpyArray& array, const char* role, const char* expected);

// DataError naming `path` unless `array` holds features: float32, float64
// or uint8 (integers of other widths are labels).
void require_feature_dtype(const NpyArray& array, const std::string& path);

// Writes a v1.0 '<f4' C-order file numpy.load reads; `data` holds
// product(shape) floats. Written to a temporary file of its own and
// renamed (atomic_file.h), so a failed write never leaves a half file
// under `path`.
void save_npy_fp32(const std::string& path, const float* data, const std::vector<size_t>& shape);
// The same for '<i8' (class ids, as torch.argmax gives them).
void save_npy_int64(const std::string& path, const int64_t* data, const std::vector<size_t>& shape);

// Reads an f4 or f8 array whose shape must equal `expected_shape`, else
// DataError("<path>: shape mismatch: file has (10, 5), expected (10, 10)").
// Non-finite values are refused too: they are never valid weights.
std::vector<float> load_npy_fp32(const std::string& path, const std::vector<size_t>& expected_shape);

}  // namespace ddp
