// fuzz_npy.cpp: libFuzzer harness of the .npy reader (trainer/io/npy_io.h,
// trainer/io/npy_header.h). One file goes to parse_npy (gunzipped first when it
// is gzip, as read_npy does) and, when it parses, through the value
// conversion the loaders apply; an input holding the split marker is an x
// file and a y file for load_npy_dataset, and x is also read as weights by
// load_npy_fp32 with the shape it declares.
#include <cstddef>
#include <cstdint>

#include "fuzz_support.h"
#include "trainer/data/npy_dataset.h"
#include "trainer/io/npy_io.h"

using namespace ddp;
using namespace ddp::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static MemFile x_file("fuzz-x"), y_file("fuzz-y");
  Bytes first, second;
  if (split_input(data, size, first, second)) {
    x_file.write(first);
    y_file.write(second);
    expect_parser_error([&] { load_npy_dataset(x_file.path(), y_file.path()); });
    expect_parser_error([&] {
      const NpyArray x = parse_npy(decoded(first, "x.npy"), "x.npy");
      load_npy_fp32(x_file.path(), x.shape);
    });
    return 0;
  }
  const Bytes bytes(data, data + size);
  expect_parser_error([&] {
    const NpyArray array = parse_npy(decoded(bytes, "fuzz.npy"), "fuzz.npy");
    if (array.is_integer()) {
      npy_values_as_int(array);
    } else {
      npy_values_as_float(array);
    }
  });
  return 0;
}
