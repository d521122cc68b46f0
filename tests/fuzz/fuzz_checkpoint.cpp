// fuzz_checkpoint.cpp: libFuzzer harness of the checkpoint reader
// (trainer/checkpoint/checkpoint.h) and of the contents check that follows it
// (trainer/checkpoint/checkpoint_validation.h). The input goes to parse_checkpoint as it
// is, which mostly exercises the magic, version, length and truncation
// checks: a mutated file almost never keeps its CRC-32. So it is parsed a
// second time with its last 12 bytes replaced by a trailer that matches
// (total length, CRC of the rest), which takes every input past the checksum
// into the field decoding a file "some other writer produced" would reach.
// Every parsed state then goes through validate_checkpoint_contents, and a
// state it accepts through the compatibility check resume applies.
//
// Byte mutations rarely produce a sound file with one field out of range, so
// the custom mutator below, when the input decodes, mutates one decoded field
// (checkpoint_field_mutator.h) and re-serializes it (format 2, or format 1
// when format 2 cannot hold the mutated state, and now and then anyway):
// the checksum holds and the mutation reaches the contents check. The
// trailer re-seal above is format 1's; a format 2 input reaches the
// decoder through the mutator. Otherwise,
// and for a share of decodable inputs too, it is libFuzzer's byte mutation.
//
// The rule: any bytes either parse and validate or raise ddp::Error; the
// contents check refuses only with a one-line CheckpointError, and a state it
// accepts has a sound shape (compatible with itself), a finite positive loss
// scale, a non-negative position and finite buffers.
#include <zlib.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "checkpoint_field_mutator.h"
#include "fuzz_support.h"
#include "trainer/models/mlp/mlp_config.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/checkpoint_v1.h"
#include "trainer/checkpoint/checkpoint_validation.h"
#include "trainer/checkpoint/model_kinds.h"

using namespace ddp;
using namespace ddp::fuzz;

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace {

constexpr size_t kTrailerBytes = 12;  // u64 total length, u32 CRC-32
constexpr char kName[] = "fuzz.ddpckpt";

Bytes with_valid_trailer(const uint8_t* data, size_t size) {
  Bytes bytes(data, data + size);
  const uint64_t total = size;
  for (int i = 0; i < 8; ++i) bytes[size - 12 + i] = static_cast<uint8_t>(total >> (8 * i));
  const uint32_t crc = static_cast<uint32_t>(crc32(crc32(0L, Z_NULL, 0), bytes.data(), static_cast<uInt>(size - 4)));
  for (int i = 0; i < 4; ++i) bytes[size - 4 + i] = static_cast<uint8_t>(crc >> (8 * i));
  return bytes;
}

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "FINDING: %s\n", what.c_str());
  std::abort();
}

// Whether validation accepts `s`; its refusal must be a one-line
// CheckpointError about the contents (any other ddp::Error is a finding:
// the check has no other way to fail).
bool contents_valid(const TrainState& s) {
  try {
    validate_checkpoint_contents(s, kName);
    return true;
  } catch (const CheckpointError& e) {
    const std::string text = e.what();
    if (text.find('\n') != std::string::npos) finding("validation message is not one line: " + text);
    if (e.problem().rfind("corrupt contents: ", 0) != 0) finding("validation message does not say so: " + text);
    return false;
  } catch (const Error& e) {
    finding(std::string("validation threw a ddp::Error that is not a CheckpointError: ") + e.what());
  }
}

// What an accepted state promises the trainer, restated independently.
void expect_sound(const TrainState& s) {
  if (!(std::isfinite(s.scaler.scale) && s.scaler.scale > 0)) finding("accepted a non-finite or non-positive scale");
  if (s.step < 0 || s.epoch < 0 || s.epoch_sample_offset < 0 || s.skipped_steps < 0 || s.epoch > s.step ||
      s.skipped_steps > s.step || s.scaler.growth_tracker < 0) {
    finding("accepted a negative or inconsistent position");
  }
  for (const std::vector<float>* b : {&s.master_weights_fp32, &s.momentum_fp32})
    for (float v : *b)
      if (!std::isfinite(v)) finding("accepted a non-finite weight or momentum value");
  // Resume sizes the model by the shape: one that validated must be usable.
  try {
    uint64_t count = 0;  // what the shape implies, as resume's registry would have it
    if (!checkpoint_dims_problem(s.model_kind, s.model_dims, count).empty())
      finding("accepted dims the model catalog refuses");
    check_checkpoint_compatible(s, s.model_dims, s.activation, s.loss, count, kName);
  } catch (const Error& e) {
    finding(std::string("accepted a shape resume cannot use: ") + e.what());
  }
}

void parse_and_check(const Bytes& bytes) {
  const TrainState s = parse_checkpoint(bytes, kName);
  if (!contents_valid(s)) return;
  expect_sound(s);
  // What resume does with another run's model (a mismatch, usually).
  static const size_t parameter_count = mlp_parameters(std::vector<int64_t>{10, 10}).parameter_count();
  expect_parser_error([&] { check_checkpoint_compatible(s, {10, 10}, "relu", "mse", parameter_count, kName); });
}

// The input decoded, as it is or re-sealed; false if neither parses.
bool decode(const uint8_t* data, size_t size, TrainState& s) {
  try {
    s = parse_checkpoint(Bytes(data, data + size), kName);
    return true;
  } catch (const Error&) {
  }
  if (size < 16 + kTrailerBytes) return false;
  try {
    s = parse_checkpoint(with_valid_trailer(data, size), kName);
    return true;
  } catch (const Error&) {
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  expect_parser_error([&] { parse_and_check(Bytes(data, data + size)); });
  if (size >= 16 + kTrailerBytes) {
    expect_parser_error([&] { parse_and_check(with_valid_trailer(data, size)); });
  }
  return 0;
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  MutatorRng rng(seed);
  TrainState s;
  // One in four decodable inputs still gets byte mutations, which reach the
  // decoder's own checks and the fields' encodings.
  if (rng() % 4 != 0 && decode(data, size, s)) {
    // Half the time from a consistent state, so the mutated field is the
    // only one out of range; otherwise errors accumulate (the first found wins).
    if (rng() % 2 == 0) make_consistent(s, rng);
    mutate_one_field(s, rng);
    if (rng() % 8 == 0) mutate_one_field(s, rng);
    // Format 2 when the state can be written so (its tensors name the
    // layout), else format 1, which stores any shape and any bytes: both
    // readers get states one field out of range.
    for (const bool v1 : {rng() % 4 == 0, true}) {
      try {
        const Bytes out = v1 ? serialize_checkpoint_v1(s) : serialize_checkpoint(s);
        if (out.size() <= max_size) {
          std::memcpy(data, out.data(), out.size());
          return out.size();
        }
        break;
      } catch (const Error&) {
        // Format 2 refuses a state whose tensors do not fit its buffers; format 1 a string over 4 GiB.
      }
    }
  }
  return LLVMFuzzerMutate(data, size, max_size);
}
