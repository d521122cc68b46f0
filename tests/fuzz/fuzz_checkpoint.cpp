// fuzz_checkpoint.cpp: libFuzzer harness of the checkpoint reader
// (trainer/checkpoint.h). The input goes to parse_checkpoint as it is, which
// mostly exercises the magic, version, length and truncation checks: a
// mutated file almost never keeps its CRC-32. So it is parsed a second time
// with its last 12 bytes replaced by a trailer that matches (total length,
// CRC of the rest), which takes every input past the checksum into the
// field decoding a file "some other writer produced" would reach; a parsed
// state then goes through the compatibility check resume applies.
#include <zlib.h>

#include <cstddef>
#include <cstdint>

#include "fuzz_support.h"
#include "trainer/checkpoint.h"

using namespace ddp;
using namespace ddp::fuzz;

namespace {

constexpr size_t kTrailerBytes = 12;  // u64 total length, u32 CRC-32

Bytes with_valid_trailer(const uint8_t* data, size_t size) {
  Bytes bytes(data, data + size);
  const uint64_t total = size;
  for (int i = 0; i < 8; ++i) bytes[size - 12 + i] = static_cast<uint8_t>(total >> (8 * i));
  const uint32_t crc = static_cast<uint32_t>(crc32(crc32(0L, Z_NULL, 0), bytes.data(), static_cast<uInt>(size - 4)));
  for (int i = 0; i < 4; ++i) bytes[size - 4 + i] = static_cast<uint8_t>(crc >> (8 * i));
  return bytes;
}

void parse_and_check(const Bytes& bytes) {
  const TrainState s = parse_checkpoint(bytes, "fuzz.ddpckpt");
  // What resume does (this run's model against the file's) ...
  expect_parser_error([&] { check_checkpoint_compatible(s, {10, 10}, "relu", "mse", "fuzz.ddpckpt"); });
  // ... and the same with the file's own shape, which reaches the parameter
  // count of arbitrary widths.
  check_checkpoint_compatible(s, s.layer_widths, s.activation, s.loss, "fuzz.ddpckpt");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  expect_parser_error([&] { parse_and_check(Bytes(data, data + size)); });
  if (size >= 16 + kTrailerBytes) {
    expect_parser_error([&] { parse_and_check(with_valid_trailer(data, size)); });
  }
  return 0;
}
