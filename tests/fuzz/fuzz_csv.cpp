// fuzz_csv.cpp: libFuzzer harness of the CSV reader (trainer/data/csv_reader.h):
// the text (gunzipped first when it is gzip, as load_csv_dataset does) goes
// to parse_csv, which ends in validate_dataset.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_support.h"
#include "trainer/data/csv_reader.h"

using namespace ddp;
using namespace ddp::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Bytes bytes(data, data + size);
  expect_parser_error([&] {
    const Bytes text = decoded(bytes, "fuzz.csv");
    parse_csv(std::string(text.begin(), text.end()), "fuzz.csv");
  });
  return 0;
}
