// test_checkpoint.cpp: the checkpoint file format, its refusal of every kind
// of damage with the right one-line message, the atomic write, and the
// checkpoint directory (newest valid file, pruning).
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "test_support.h"
#include "trainer/checkpoint.h"
#include "trainer/checkpoint_dir.h"

namespace ddp {
namespace {

namespace fs = std::filesystem;

// ---- helpers --------------------------------------------------------------------

uint64_t mlp_params(const std::vector<int64_t>& widths) {
  uint64_t count = 0;
  for (size_t i = 0; i + 1 < widths.size(); ++i) count += widths[i] * widths[i + 1] + widths[i + 1];
  return count;
}

float float_from_bits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Random contents in every field; floats are random bit patterns, so NaN
// payloads, -0, infinities and subnormals all occur and must survive bitwise.
TrainState random_state(std::mt19937_64& rng, int64_t max_width) {
  std::uniform_int_distribution<int64_t> width(1, max_width);
  std::uniform_int_distribution<int> layers(2, 5);
  TrainState s;
  const int n = layers(rng);
  for (int i = 0; i < n; ++i) s.layer_widths.push_back(width(rng));
  static const char* kActivations[] = {"relu", "gelu"};
  static const char* kLosses[] = {"xent", "mse"};
  s.activation = kActivations[rng() % 2];
  s.loss = kLosses[rng() % 2];
  if (rng() % 4 == 0) s.activation += std::string("\0\xff\n", 3);  // any bytes survive
  const uint64_t params = mlp_params(s.layer_widths);
  for (uint64_t i = 0; i < params; ++i) {
    s.master_weights_fp32.push_back(float_from_bits(static_cast<uint32_t>(rng())));
    s.momentum_fp32.push_back(float_from_bits(static_cast<uint32_t>(rng())));
  }
  s.momentum_initialized = rng() % 2 == 1;
  const uint64_t scale_bits = rng();
  std::memcpy(&s.scaler.scale, &scale_bits, 8);
  s.scaler.growth_tracker = static_cast<int64_t>(rng());
  s.scaler.hysteresis_left = static_cast<int64_t>(rng());
  s.step = static_cast<int64_t>(rng());
  s.epoch = static_cast<int64_t>(rng());
  s.epoch_sample_offset = static_cast<int64_t>(rng());
  s.skipped_steps = static_cast<int64_t>(rng());
  s.seed = rng();
  s.run_id = rng();
  s.train_samples = rng();
  s.global_batch = static_cast<int64_t>(rng());
  return s;
}

TrainState small_state(int64_t step) {
  TrainState s;
  s.layer_widths = {3, 2, 2};
  s.activation = "relu";
  s.loss = "xent";
  const uint64_t params = mlp_params(s.layer_widths);
  for (uint64_t i = 0; i < params; ++i) {
    s.master_weights_fp32.push_back(0.25f * static_cast<float>(i) - 1.0f);
    s.momentum_fp32.push_back(-0.5f * static_cast<float>(i));
  }
  s.step = step;
  s.momentum_initialized = step > 0;  // a step that was not skipped set it
  s.seed = 42;
  s.run_id = 0x5eed0001;
  s.train_samples = 100;
  s.global_batch = 10;
  return s;
}

template <typename T>
bool same_bits(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

void expect_same_state(const TrainState& want, const TrainState& got) {
  EXPECT_EQ(want.layer_widths, got.layer_widths);
  EXPECT_EQ(want.activation, got.activation);
  EXPECT_EQ(want.loss, got.loss);
  ASSERT_EQ(want.master_weights_fp32.size(), got.master_weights_fp32.size());
  ASSERT_EQ(want.momentum_fp32.size(), got.momentum_fp32.size());
  for (size_t i = 0; i < want.master_weights_fp32.size(); ++i) {
    ASSERT_TRUE(same_bits(want.master_weights_fp32[i], got.master_weights_fp32[i])) << "master weight " << i;
  }
  for (size_t i = 0; i < want.momentum_fp32.size(); ++i) {
    ASSERT_TRUE(same_bits(want.momentum_fp32[i], got.momentum_fp32[i])) << "momentum " << i;
  }
  EXPECT_EQ(want.momentum_initialized, got.momentum_initialized);
  EXPECT_TRUE(same_bits(want.scaler.scale, got.scaler.scale));
  EXPECT_EQ(want.scaler.growth_tracker, got.scaler.growth_tracker);
  EXPECT_EQ(want.scaler.hysteresis_left, got.scaler.hysteresis_left);
  EXPECT_EQ(want.step, got.step);
  EXPECT_EQ(want.epoch, got.epoch);
  EXPECT_EQ(want.epoch_sample_offset, got.epoch_sample_offset);
  EXPECT_EQ(want.skipped_steps, got.skipped_steps);
  EXPECT_EQ(want.seed, got.seed);
  EXPECT_EQ(want.run_id, got.run_id);
  EXPECT_EQ(want.train_samples, got.train_samples);
  EXPECT_EQ(want.global_batch, got.global_batch);
}

// The one-line message of the CheckpointError `fn` throws.
template <typename Fn>
std::string checkpoint_error_of(Fn&& fn) {
  try {
    fn();
  } catch (const CheckpointError& e) {
    const std::string text = e.what();
    EXPECT_EQ(text.find('\n'), std::string::npos) << "message is not one line: " << text;
    return text;
  }
  ADD_FAILURE() << "no CheckpointError thrown";
  return "<no error>";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Rewrites the trailer (length and CRC) so a deliberately altered body passes
// the checksum and reaches the field decoder.
void reseal(std::vector<uint8_t>& bytes) {
  const uint64_t total = bytes.size();
  for (int i = 0; i < 8; ++i) bytes[bytes.size() - 12 + i] = static_cast<uint8_t>(total >> (8 * i));
  const uint32_t crc = static_cast<uint32_t>(crc32(0L, bytes.data(), static_cast<uInt>(bytes.size() - 4)));
  for (int i = 0; i < 4; ++i) bytes[bytes.size() - 4 + i] = static_cast<uint8_t>(crc >> (8 * i));
}

void put_u64(std::vector<uint8_t>& bytes, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) bytes[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

std::set<std::string> file_names_in(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.insert(entry.path().filename().string());
  return names;
}

// A unique directory per test, removed afterwards.
class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::make_temp_dir("ckpt");
    seed_ = test::test_seed();
    rng_.seed(seed_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

  std::string dir_;
  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
};

using CheckpointFormat = CheckpointTest;
using CheckpointCorruption = CheckpointTest;
using CheckpointCompat = CheckpointTest;
using CheckpointAtomicWrite = CheckpointTest;
using CheckpointDir = CheckpointTest;

// ---- format ---------------------------------------------------------------------

TEST_F(CheckpointFormat, RandomStatesRoundTripBitwise) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  for (int trial = 0; trial < 20; ++trial) {
    const TrainState want = random_state(rng_, 40);
    expect_same_state(want, parse_checkpoint(serialize_checkpoint(want), "memory"));
    const std::string file = path(checkpoint_file_name(trial));
    write_checkpoint_atomic(file, want);
    expect_same_state(want, read_checkpoint(file));
  }
}

TEST_F(CheckpointFormat, DefaultStateRoundTrips) {
  const TrainState empty;
  expect_same_state(empty, parse_checkpoint(serialize_checkpoint(empty), "memory"));
}

TEST_F(CheckpointFormat, LayoutIsMagicVersionHeaderLengthAndTrailer) {
  const std::vector<uint8_t> bytes = serialize_checkpoint(small_state(7));
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

// ---- corruption -------------------------------------------------------------------

TEST_F(CheckpointCorruption, BadMagicIsRefused) {
  const std::string file = path("weights.npy");
  write_bytes(file, {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x'});
  const std::string text = checkpoint_error_of([&] { read_checkpoint(file); });
  EXPECT_EQ(text, "checkpoint " + file + ": not a ddp_train checkpoint (bad magic)");
  // Short garbage too, and a file shorter than the magic that does not agree.
  EXPECT_TRUE(contains(checkpoint_error_of([] { parse_checkpoint({'D', 'D', 'X'}, "short"); }), "bad magic"));
}

TEST_F(CheckpointCorruption, OtherVersionIsRefused) {
  std::vector<uint8_t> bytes = serialize_checkpoint(small_state(1));
  bytes[8] = 7;
  reseal(bytes);
  EXPECT_EQ(checkpoint_error_of([&] { parse_checkpoint(bytes, "old.ddpckpt"); }),
            "checkpoint old.ddpckpt: unsupported checkpoint format version 7 (this build reads 1)");
}

TEST_F(CheckpointCorruption, EveryTruncationIsRefused) {
  const std::vector<uint8_t> small = serialize_checkpoint(small_state(3));
  for (size_t length = 0; length < small.size(); ++length) {
    const std::vector<uint8_t> cut(small.begin(), small.begin() + length);
    const std::string text = checkpoint_error_of([&] { parse_checkpoint(cut, "cut"); });
    EXPECT_TRUE(contains(text, "truncated")) << "length " << length << ": " << text;
  }
  SCOPED_TRACE("seed " + std::to_string(seed_));
  const std::vector<uint8_t> big = serialize_checkpoint(random_state(rng_, 64));
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
  const std::vector<uint8_t> small = serialize_checkpoint(small_state(5));
  for (size_t position = 0; position < small.size(); ++position) {
    std::vector<uint8_t> bytes = small;
    const int mask = mask_dist(rng_);
    bytes[position] ^= static_cast<uint8_t>(mask);
    const std::string text = checkpoint_error_of([&] { parse_checkpoint(bytes, "flip"); });
    EXPECT_TRUE(contains(text, expected_problem_for_flip(position)))
        << "position " << position << " mask " << mask << ": " << text;
  }
  const std::vector<uint8_t> big = serialize_checkpoint(random_state(rng_, 64));
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
  std::vector<uint8_t> bytes = serialize_checkpoint(small_state(5));
  bytes.insert(bytes.end(), {1, 2, 3});
  EXPECT_TRUE(contains(checkpoint_error_of([&] { parse_checkpoint(bytes, "long"); }), "3 unexpected bytes"));
}

// A file whose checksum holds but whose counts are absurd (another writer, or
// a crafted file) is refused before anything is allocated.
TEST_F(CheckpointCorruption, AbsurdCountsBehindAValidChecksumAreRefused) {
  const std::vector<uint8_t> good = serialize_checkpoint(small_state(5));
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
  const std::vector<uint8_t> good = serialize_checkpoint(random_state(rng_, 8));
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

// ---- compatibility ----------------------------------------------------------------

TEST_F(CheckpointCompat, MismatchesAreNamed) {
  TrainState ckpt;
  ckpt.layer_widths = {784, 512, 10};
  ckpt.activation = "relu";
  ckpt.loss = "xent";
  ckpt.master_weights_fp32.assign(mlp_params(ckpt.layer_widths), 0.0f);
  ckpt.momentum_fp32.assign(mlp_params(ckpt.layer_widths), 0.0f);
  EXPECT_NO_THROW(check_checkpoint_compatible(ckpt, {784, 512, 10}, "relu", "xent", "c.ddpckpt"));

  EXPECT_EQ(checkpoint_error_of([&] { check_checkpoint_compatible(ckpt, {784, 256, 10}, "relu", "xent", "c.ddpckpt"); }),
            "checkpoint c.ddpckpt: model shape mismatch: checkpoint has layers 784,512,10, this run 784,256,10");
  EXPECT_EQ(checkpoint_error_of([&] { check_checkpoint_compatible(ckpt, {784, 512, 10}, "gelu", "xent", "c.ddpckpt"); }),
            "checkpoint c.ddpckpt: activation mismatch: checkpoint has relu, this run gelu");
  EXPECT_EQ(checkpoint_error_of([&] { check_checkpoint_compatible(ckpt, {784, 512, 10}, "relu", "mse", "c.ddpckpt"); }),
            "checkpoint c.ddpckpt: loss mismatch: checkpoint has xent, this run mse");

  TrainState short_weights = ckpt;
  short_weights.master_weights_fp32.pop_back();
  EXPECT_TRUE(contains(checkpoint_error_of([&] {
                         check_checkpoint_compatible(short_weights, {784, 512, 10}, "relu", "xent", "c.ddpckpt");
                       }),
                       "parameter count mismatch"));
  TrainState no_momentum = ckpt;
  no_momentum.momentum_fp32.clear();
  EXPECT_TRUE(contains(checkpoint_error_of([&] {
                         check_checkpoint_compatible(no_momentum, {784, 512, 10}, "relu", "xent", "c.ddpckpt");
                       }),
                       "momentum size mismatch"));
}

// ---- atomic write -----------------------------------------------------------------

TEST_F(CheckpointAtomicWrite, LeavesOnlyTheFileOnSuccess) {
  const std::string name = checkpoint_file_name(10);
  write_checkpoint_atomic(path(name), small_state(10));
  write_checkpoint_atomic(path(name), small_state(11));  // replaces
  EXPECT_EQ(file_names_in(dir_), std::set<std::string>{name});
  EXPECT_EQ(read_checkpoint(path(name)).step, 11);
}

// Restores a resource limit and the SIGXFSZ disposition when the test ends.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t max_bytes) {
    getrlimit(RLIMIT_FSIZE, &saved_);
    old_handler_ = signal(SIGXFSZ, SIG_IGN);  // write() then fails with EFBIG instead of killing us
    rlimit limited = saved_;
    limited.rlim_cur = max_bytes;
    setrlimit(RLIMIT_FSIZE, &limited);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &saved_);
    signal(SIGXFSZ, old_handler_);
  }

 private:
  rlimit saved_{};
  sighandler_t old_handler_;
};

// A write that fails half-way (here: a file-size limit, as a full disk would)
// leaves the previous checkpoint untouched and no temporary file behind.
TEST_F(CheckpointAtomicWrite, FailedWriteKeepsOldFileAndRemovesTemp) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  const std::string file = path(checkpoint_file_name(1));
  const TrainState old_state = small_state(1);
  write_checkpoint_atomic(file, old_state);
  // Someone else's leftover temp file must survive too.
  const std::string other_temp = file + ".tmp.999999999";
  write_bytes(other_temp, {1, 2, 3});

  TrainState big = random_state(rng_, 200);
  big.master_weights_fp32.resize(200000, 1.0f);  // ~800 KB, far beyond the limit
  std::string message;
  {
    FileSizeLimit limit(64 * 1024);
    try {
      write_checkpoint_atomic(file, big);
    } catch (const Error& e) {
      message = e.what();
    }
  }
  ASSERT_FALSE(message.empty()) << "write under a 64 KiB file-size limit did not fail";
  EXPECT_TRUE(contains(message, file)) << message;
  EXPECT_TRUE(contains(message, std::strerror(EFBIG))) << message;
  EXPECT_EQ(file_names_in(dir_), (std::set<std::string>{checkpoint_file_name(1), fs::path(other_temp).filename().string()}));
  expect_same_state(old_state, read_checkpoint(file));
}

TEST_F(CheckpointAtomicWrite, MissingDirectoryIsNamed) {
  const std::string file = dir_ + "/no/such/dir/" + checkpoint_file_name(1);
  try {
    write_checkpoint_atomic(file, small_state(1));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), file)) << e.what();
    EXPECT_TRUE(contains(e.what(), std::strerror(ENOENT))) << e.what();
  }
  EXPECT_TRUE(file_names_in(dir_).empty());
}

// A reader racing the writer sees the old or the new checkpoint, never a
// partial one: the rename is the only moment the name changes content.
TEST_F(CheckpointAtomicWrite, ConcurrentReaderSeesOnlyCompleteFiles) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  const std::string file = path(checkpoint_file_name(0));
  TrainState a = random_state(rng_, 100);
  TrainState b = a;
  a.step = 1;
  b.step = 2;
  write_checkpoint_atomic(file, a);
  std::atomic<bool> done{false};
  std::atomic<int> bad_reads{0};
  std::atomic<int> reads{0};
  std::thread reader([&] {
    while (!done.load()) {
      try {
        const TrainState got = read_checkpoint(file);
        if (got.step != 1 && got.step != 2) ++bad_reads;
      } catch (const std::exception&) {
        ++bad_reads;
      }
      ++reads;
    }
  });
  for (int i = 0; i < 40; ++i) write_checkpoint_atomic(file, i % 2 ? a : b);
  done = true;
  reader.join();
  EXPECT_EQ(bad_reads.load(), 0) << "of " << reads.load() << " reads";
}

// ---- directory --------------------------------------------------------------------

TEST(CheckpointNames, StepIsZeroPaddedToTwelveDigits) {
  EXPECT_EQ(checkpoint_file_name(0), "ckpt-step000000000000.ddpckpt");
  EXPECT_EQ(checkpoint_file_name(1234), "ckpt-step000000001234.ddpckpt");
  EXPECT_EQ(checkpoint_file_name(1234567890123), "ckpt-step1234567890123.ddpckpt");
  EXPECT_THROW(checkpoint_file_name(-1), Error);
}

TEST_F(CheckpointDir, PicksNewestValidAndReportsWhatItSkipped) {
  const std::string older = path(checkpoint_file_name(100));
  const std::string newest = path(checkpoint_file_name(200));
  const std::string leftover = path(checkpoint_file_name(300)) + ".tmp.12345";
  write_checkpoint_atomic(older, small_state(100));
  write_checkpoint_atomic(newest, small_state(200));
  std::vector<uint8_t> damaged = serialize_checkpoint(small_state(200));
  damaged[damaged.size() / 2] ^= 0x10;
  write_bytes(newest, damaged);
  write_bytes(leftover, std::vector<uint8_t>(20, 0));
  write_bytes(path("metrics.jsonl"), {'{', '}', '\n'});           // not a checkpoint
  write_bytes(path("ckpt-step5.ddpckpt"), {'x'});                // not our naming
  write_bytes(path(checkpoint_file_name(50) + ".bak"), {'x'});   // not our naming

  const CheckpointScan scan = find_newest_valid_checkpoint(dir_);
  EXPECT_EQ(scan.newest_valid, older);
  EXPECT_EQ(scan.candidates, 2u);
  ASSERT_EQ(scan.skipped.size(), 2u);
  EXPECT_EQ(scan.skipped[0].first, leftover);
  EXPECT_TRUE(contains(scan.skipped[0].second, "incomplete write")) << scan.skipped[0].second;
  EXPECT_EQ(scan.skipped[1].first, newest);
  EXPECT_EQ(scan.skipped[1].second, "checksum mismatch (file corrupt)");
  EXPECT_TRUE(fs::exists(leftover)) << "the scan must not delete anything";
  EXPECT_TRUE(fs::exists(newest));
  EXPECT_EQ(read_checkpoint(scan.newest_valid).step, 100);
}

TEST_F(CheckpointDir, EmptyOrMissingDirectoryHasNoCheckpoint) {
  for (const std::string& dir : {dir_, dir_ + "/missing"}) {
    const CheckpointScan scan = find_newest_valid_checkpoint(dir);
    EXPECT_TRUE(scan.newest_valid.empty());
    EXPECT_EQ(scan.candidates, 0u);
    EXPECT_TRUE(scan.skipped.empty());
  }
}

TEST_F(CheckpointDir, NoValidCheckpointListsEveryCandidate) {
  for (int64_t step : {1, 2, 3}) write_bytes(path(checkpoint_file_name(step)), {'D', 'D', 'P'});
  const CheckpointScan scan = find_newest_valid_checkpoint(dir_);
  EXPECT_TRUE(scan.newest_valid.empty());
  EXPECT_EQ(scan.candidates, 3u);
  ASSERT_EQ(scan.skipped.size(), 3u);
  EXPECT_EQ(scan.skipped[0].first, path(checkpoint_file_name(3)));  // newest first
  EXPECT_TRUE(contains(scan.skipped[0].second, "truncated"));
}

// A checksum that holds is not a valid state: the scan passes over a newer
// file whose contents are out of range and names the field.
TEST_F(CheckpointDir, ScanPassesOverContentsOutOfRange) {
  write_checkpoint_atomic(path(checkpoint_file_name(4)), small_state(4));
  TrainState bad = small_state(8);
  bad.scaler.scale = std::nan("");
  write_checkpoint_atomic(path(checkpoint_file_name(8)), bad);
  const CheckpointScan scan = find_newest_valid_checkpoint(dir_);
  EXPECT_EQ(scan.newest_valid, path(checkpoint_file_name(4)));
  ASSERT_EQ(scan.skipped.size(), 1u);
  EXPECT_TRUE(contains(scan.skipped[0].second, "corrupt contents")) << scan.skipped[0].second;
  EXPECT_TRUE(contains(scan.skipped[0].second, "scale")) << scan.skipped[0].second;
}

TEST_F(CheckpointDir, PruneKeepsTheNewestOfThisRunOnly) {
  const uint64_t ours = 0x5eed0001;
  const std::vector<int64_t> steps = {5, 1000, 20, 7, 100};
  for (int64_t step : steps) write_checkpoint_atomic(path(checkpoint_file_name(step)), small_state(step));
  // Another run's checkpoints, another model's, a legacy one (no lineage) and
  // a damaged one: none of them is this run's to delete.
  TrainState other = small_state(3);
  other.run_id = ours + 1;
  write_checkpoint_atomic(path(checkpoint_file_name(3)), other);
  TrainState other_model = small_state(2);
  other_model.layer_widths = {2, 2, 2};
  other_model.master_weights_fp32.resize(12), other_model.momentum_fp32.resize(12);
  write_checkpoint_atomic(path(checkpoint_file_name(2)), other_model);
  TrainState legacy = small_state(1);
  legacy.run_id = 0;
  write_checkpoint_atomic(path(checkpoint_file_name(1)), legacy);
  write_bytes(path(checkpoint_file_name(4)), {'D', 'D', 'P', 'C'});
  const std::string leftover = checkpoint_file_name(2000) + ".tmp.1";
  write_bytes(path(leftover), {0});
  write_bytes(path("metrics.jsonl"), {'\n'});
  const size_t all = steps.size() + 6;
  const std::vector<int64_t> widths = {3, 2, 2};

  EXPECT_TRUE(prune_checkpoints(dir_, 0, ours, widths, "").empty());  // keep all
  EXPECT_EQ(file_names_in(dir_).size(), all);
  EXPECT_TRUE(prune_checkpoints(dir_, 1, 0, widths, "").empty());  // no lineage: nothing is provably ours
  EXPECT_EQ(file_names_in(dir_).size(), all);

  // The one just written survives although three newer ones are kept.
  const std::vector<std::string> removed = prune_checkpoints(dir_, 2, ours, widths, path(checkpoint_file_name(7)));
  EXPECT_EQ(removed.size(), 2u);
  std::set<std::string> want = file_names_in(dir_);
  EXPECT_EQ(want.count(checkpoint_file_name(1000)) + want.count(checkpoint_file_name(100)) +
                want.count(checkpoint_file_name(7)),
            3u);
  EXPECT_EQ(want.count(checkpoint_file_name(20)) + want.count(checkpoint_file_name(5)), 0u);
  for (int64_t foreign : {1, 2, 3, 4}) EXPECT_EQ(want.count(checkpoint_file_name(foreign)), 1u) << foreign;
  EXPECT_EQ(want.count(leftover) + want.count("metrics.jsonl"), 2u);

  EXPECT_TRUE(prune_checkpoints(dir_, 5, ours, widths, "").empty());  // fewer than keep: nothing to do
  EXPECT_EQ(file_names_in(dir_).size(), all - 2);
  EXPECT_TRUE(prune_checkpoints(dir_ + "/missing", 1, ours, widths, "").empty());
}

TEST_F(CheckpointDir, HeaderNamesTheLineageWithoutReadingTheWeights) {
  TrainState s = small_state(42);
  write_checkpoint_atomic(path("a"), s);
  const CheckpointHeader h = read_checkpoint_header(path("a"));
  EXPECT_EQ(h.step, 42);
  EXPECT_EQ(h.run_id, s.run_id);
  EXPECT_EQ(h.layer_widths, s.layer_widths);
  // The weights may be cut: the header still reads (pruning decides on it).
  std::vector<uint8_t> bytes = serialize_checkpoint(s);
  bytes.resize(bytes.size() - 20);
  write_bytes(path("b"), bytes);
  EXPECT_EQ(read_checkpoint_header(path("b")).run_id, s.run_id);
  bytes.resize(20);
  write_bytes(path("c"), bytes);
  EXPECT_TRUE(contains(checkpoint_error_of([&] { read_checkpoint_header(path("c")); }), "truncated"));
}

TEST(CheckpointLegacy, FilesWithoutTheOptionalHeaderFieldsStillRead) {
  // A checkpoint of an earlier build: the header ends after the seed.
  TrainState s = small_state(9);
  std::vector<uint8_t> bytes = serialize_checkpoint(s);
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

}  // namespace
}  // namespace ddp
