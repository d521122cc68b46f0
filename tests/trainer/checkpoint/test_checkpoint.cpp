// test_checkpoint.cpp: checkpoint format version 1, what earlier builds
// wrote and this one still reads (magic, version, header, length and CRC
// trailer; files without the optional header fields), and its refusal of
// every kind of damage with the right one-line message. Format 2:
// test_checkpoint_v2.cpp.
#include <gtest/gtest.h>

#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "checkpoint_test_support.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/checkpoint_dir.h"
#include "trainer/checkpoint/checkpoint_v1.h"

namespace ddp {
namespace {

using namespace test;  // checkpoint_test_support.h: states, byte surgery, the fixture

// ---- format ---------------------------------------------------------------------

TEST_F(CheckpointFormat, LayoutIsMagicVersionHeaderLengthAndTrailer) {
  const std::vector<uint8_t> bytes = serialize_checkpoint_v1(small_state(7));
  ASSERT_GE(bytes.size(), 28u);
  EXPECT_EQ(0, std::memcmp(bytes.data(), "DDPCKPT1", 8));
  EXPECT_EQ(bytes[8], 1);
  EXPECT_EQ(bytes[9] | bytes[10] | bytes[11], 0);
  uint64_t total = 0;
  for (int i = 0; i < 8; ++i) total |= static_cast<uint64_t>(bytes[bytes.size() - 12 + i]) << (8 * i);
  EXPECT_EQ(total, bytes.size());
  uint32_t crc = 0;
  for (int i = 0; i < 4; ++i) crc |= static_cast<uint32_t>(bytes[bytes.size() - 4 + i]) << (8 * i);
  EXPECT_EQ(crc, static_cast<uint32_t>(crc32(0L, bytes.data(), static_cast<uInt>(bytes.size() - 4))));
  // Header: widths (8 + 3*8), two strings (4+4 each), flag, scale, 2 scaler
  // ints, 4 position ints, seed.
  const uint32_t header = bytes[12] | bytes[13] << 8 | bytes[14] << 16 | static_cast<uint32_t>(bytes[15]) << 24;
  EXPECT_EQ(header, 32u + 8u + 8u + 1u + 8u + 16u + 32u + 8u + 24u);
  // Payload: two count-prefixed float vectors of 14 parameters each.
  EXPECT_EQ(bytes.size(), 16u + header + 2 * (8u + 4u * 14u) + 12u);
}

TEST(CheckpointLegacy, FilesWithoutTheOptionalHeaderFieldsStillRead) {
  // A checkpoint of an earlier build: the header ends after the seed.
  TrainState s = small_state(9);
  std::vector<uint8_t> bytes = serialize_checkpoint_v1(s);
  const uint32_t header = bytes[12] | bytes[13] << 8 | bytes[14] << 16 | static_cast<uint32_t>(bytes[15]) << 24;
  const size_t optional_at = 16 + header - 24;
  bytes.erase(bytes.begin() + optional_at, bytes.begin() + optional_at + 24);
  const uint32_t shorter = header - 24;
  for (int i = 0; i < 4; ++i) bytes[12 + i] = static_cast<uint8_t>(shorter >> (8 * i));
  bytes.resize(bytes.size() - 12);
  const uint64_t total = bytes.size() + 12;
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<uint8_t>(total >> (8 * i)));
  const uint32_t crc = static_cast<uint32_t>(crc32(0L, bytes.data(), static_cast<uInt>(bytes.size())));
  for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<uint8_t>(crc >> (8 * i)));
  const TrainState got = parse_checkpoint(bytes, "legacy");
  EXPECT_EQ(got.step, 9);
  EXPECT_EQ(got.run_id, 0u);
  EXPECT_EQ(got.train_samples, 0u);
  EXPECT_EQ(got.master_weights_fp32, s.master_weights_fp32);
}

// ---- corruption -------------------------------------------------------------------

TEST_F(CheckpointCorruption, BadMagicIsRefused) {
  const std::string file = path("weights.npy");
  write_bytes(file, {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x'});
  const std::string text = checkpoint_error_of([&] { read_checkpoint(file); });
  EXPECT_EQ(text, "checkpoint " + file + ": not a ddp_train checkpoint (bad magic)");
  // Short garbage too, and a file shorter than the magic that does not agree.
  EXPECT_TRUE(contains(checkpoint_error_of([] {
                         parse_checkpoint({'D', 'D', 'X', 'X', 'X', 'X', 'X', 'X', 'X'}, "short");
                       }),
                       "bad magic"));
}

TEST_F(CheckpointCorruption, OtherVersionIsRefused) {
  std::vector<uint8_t> bytes = serialize_checkpoint_v1(small_state(1));
  bytes[8] = 7;
  reseal(bytes);
  EXPECT_EQ(checkpoint_error_of([&] { parse_checkpoint(bytes, "old.ddpckpt"); }),
            "checkpoint old.ddpckpt: unsupported checkpoint format version 7 (this build reads 1 and 2)");
}

TEST_F(CheckpointCorruption, EveryTruncationIsRefused) {
  const std::vector<uint8_t> small = serialize_checkpoint_v1(small_state(3));
  for (size_t length = 0; length < small.size(); ++length) {
    const std::vector<uint8_t> cut(small.begin(), small.begin() + length);
    const std::string text = checkpoint_error_of([&] { parse_checkpoint(cut, "cut"); });
    EXPECT_TRUE(contains(text, "truncated")) << "length " << length << ": " << text;
  }
  SCOPED_TRACE("seed " + std::to_string(seed_));
  const std::vector<uint8_t> big = serialize_checkpoint_v1(random_state(rng_, 64, true));
  std::uniform_int_distribution<size_t> length_dist(0, big.size() - 1);
  for (int trial = 0; trial < 300; ++trial) {
    const size_t length = length_dist(rng_);
    const std::vector<uint8_t> cut(big.begin(), big.begin() + length);
    const std::string text = checkpoint_error_of([&] { parse_checkpoint(cut, "cut"); });
    EXPECT_TRUE(contains(text, "truncated")) << "length " << length << ": " << text;
  }
  // Through a file as well.
  const std::string file = path(checkpoint_file_name(1));
  write_bytes(file, std::vector<uint8_t>(big.begin(), big.begin() + big.size() / 2));
  EXPECT_TRUE(contains(checkpoint_error_of([&] { read_checkpoint(file); }), "truncated"));
}

// The expected message for one damaged byte at `position` of a `size`-byte file.
std::string expected_problem_for_flip(size_t position) {
  if (position < 8) return "bad magic";
  if (position < 12) return "unsupported checkpoint format version";
  return "checksum mismatch (file corrupt)";
}

TEST_F(CheckpointCorruption, EveryFlippedByteIsRefused) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  std::uniform_int_distribution<int> mask_dist(1, 255);
  const std::vector<uint8_t> small = serialize_checkpoint_v1(small_state(5));
  for (size_t position = 0; position < small.size(); ++position) {
    std::vector<uint8_t> bytes = small;
    const int mask = mask_dist(rng_);
    bytes[position] ^= static_cast<uint8_t>(mask);
    const std::string text = checkpoint_error_of([&] { parse_checkpoint(bytes, "flip"); });
    EXPECT_TRUE(contains(text, expected_problem_for_flip(position)))
        << "position " << position << " mask " << mask << ": " << text;
  }
  const std::vector<uint8_t> big = serialize_checkpoint_v1(random_state(rng_, 64, true));
  std::uniform_int_distribution<size_t> position_dist(0, big.size() - 1);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<uint8_t> bytes = big;
    const size_t position = position_dist(rng_);
    bytes[position] ^= static_cast<uint8_t>(mask_dist(rng_));
    const std::string text = checkpoint_error_of([&] { parse_checkpoint(bytes, "flip"); });
    EXPECT_TRUE(contains(text, expected_problem_for_flip(position))) << "position " << position << ": " << text;
  }
}

TEST_F(CheckpointCorruption, AppendedBytesAreRefused) {
  std::vector<uint8_t> bytes = serialize_checkpoint_v1(small_state(5));
  bytes.insert(bytes.end(), {1, 2, 3});
  EXPECT_TRUE(contains(checkpoint_error_of([&] { parse_checkpoint(bytes, "long"); }), "3 unexpected bytes"));
}

// A file whose checksum holds but whose counts are absurd (another writer, or
// a crafted file) is refused before anything is allocated.
TEST_F(CheckpointCorruption, AbsurdCountsBehindAValidChecksumAreRefused) {
  const std::vector<uint8_t> good = serialize_checkpoint_v1(small_state(5));
  const size_t header_bytes = good[12] | good[13] << 8 | good[14] << 16 | static_cast<size_t>(good[15]) << 24;
  const size_t master_count_at = 16 + header_bytes;
  const size_t widths_count_at = 16;
  for (size_t at : {master_count_at, widths_count_at}) {
    for (uint64_t count : {uint64_t{1} << 61, ~uint64_t{0}, uint64_t{1} << 40}) {
      std::vector<uint8_t> bytes = good;
      put_u64(bytes, at, count);
      reseal(bytes);
      EXPECT_TRUE(contains(checkpoint_error_of([&] { parse_checkpoint(bytes, "crafted"); }), "corrupt"))
          << "offset " << at << " count " << count;
    }
  }
  std::vector<uint8_t> bytes = good;
  bytes[15] = 0x7f;  // header length ~2 GiB
  reseal(bytes);
  EXPECT_TRUE(contains(checkpoint_error_of([&] { parse_checkpoint(bytes, "crafted"); }), "corrupt"));
}

// Garbage of every shape: must throw CheckpointError (or, by chance, parse),
// never crash, hang or throw anything else. A changed file whose trailer
// was not resealed must never parse: the length and checksum are there to
// catch it (a parser that accepted everything would pass the rest).
TEST_F(CheckpointCorruption, FuzzedInputNeverCrashes) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  const std::vector<uint8_t> good = serialize_checkpoint_v1(random_state(rng_, 8, true));
  std::uniform_int_distribution<int> byte_dist(0, 255);
  int accepted_unsealed_changes = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<uint8_t> bytes;
    if (trial % 3 == 0) {  // pure noise behind a valid prefix
      bytes.assign(good.begin(), good.begin() + 16);
      const size_t extra = rng_() % 200;
      for (size_t i = 0; i < extra; ++i) bytes.push_back(static_cast<uint8_t>(byte_dist(rng_)));
    } else {  // a few damaged bytes in a real file
      bytes = good;
      const int flips = 1 + static_cast<int>(rng_() % 8);
      for (int f = 0; f < flips; ++f) bytes[16 + rng_() % (bytes.size() - 16)] = static_cast<uint8_t>(byte_dist(rng_));
      if (rng_() % 3 == 0) bytes.resize(16 + rng_() % (bytes.size() - 16));
    }
    const bool resealed = bytes.size() >= 28 && rng_() % 2 == 0;
    if (resealed) reseal(bytes);  // get past the checksum too
    const bool must_fail = !resealed && bytes != good;
    try {
      parse_checkpoint(bytes, "fuzz");
      accepted_unsealed_changes += must_fail;
    } catch (const CheckpointError&) {
    }
  }
  EXPECT_EQ(accepted_unsealed_changes, 0) << "changed files parsed although their length and checksum were not updated";
}

}  // namespace
}  // namespace ddp
