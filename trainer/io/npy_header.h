// npy_header.h: the header dictionary of a NumPy .npy file, e.g.
//   {'descr': '<f4', 'fortran_order': False, 'shape': (60000, 784), }
// a Python literal that we parse by hand (three known keys, three value
// kinds) rather than with a general Python-literal parser.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace ddp {

struct NpyHeader {
  std::string descr;  // dtype string as written, e.g. "<f4", "|u1"
  bool fortran_order = false;
  std::vector<size_t> shape;  // () for a scalar
};

// Parses the dictionary text (padding and the final '\n' allowed).
// DataError("<name>: bad npy header: ...") when it is malformed, lacks or
// repeats one of the three keys, or has another key.
NpyHeader parse_npy_header(const std::string& text, const std::string& name);

// "(2, 3)", "(5,)", "()": Python's repr of the shape tuple.
std::string npy_shape_text(const std::vector<size_t>& shape);

// The dictionary text numpy would accept for a C-order array, without
// padding: "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }".
std::string format_npy_header(const std::string& descr, const std::vector<size_t>& shape);

}  // namespace ddp
