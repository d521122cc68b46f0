// fuzz_idx.cpp: libFuzzer harness of the IDX reader (trainer/data/idx_reader.h).
// One IDX file (gzipped or not) goes to parse_idx as read_idx_file would
// hand it over; an input holding the split marker is an images file and a
// labels file for load_idx_dataset, which adds the shape, count and label
// checks.
#include <cstddef>
#include <cstdint>

#include "fuzz_support.h"
#include "trainer/data/idx_reader.h"

using namespace ddp;
using namespace ddp::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static MemFile images("fuzz-images"), labels("fuzz-labels");
  Bytes first, second;
  if (split_input(data, size, first, second)) {
    images.write(first);
    labels.write(second);
    expect_parser_error([&] { load_idx_dataset(images.path(), labels.path()); });
    return 0;
  }
  const Bytes bytes(data, data + size);
  expect_parser_error([&] { parse_idx(decoded(bytes, "fuzz.idx"), "fuzz.idx"); });
  return 0;
}
