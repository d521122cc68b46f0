// checkpoint_test_support.h: what the checkpoint suites (test_checkpoint*.cpp)
// share: states to write (random bit patterns in every field, or a small
// fixed one), their bitwise comparison, the one-line CheckpointError a call
// must throw, byte surgery that reseals an altered file's trailer, and a
// fixture with a unique directory per test.
#pragma once

#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "support/data_file_support.h"  // write_bytes
#include "support/test_support.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/models/mlp/mlp_config.h"

namespace ddp::test {

namespace fs = std::filesystem;

inline uint64_t mlp_params(const std::vector<int64_t>& widths) {
  uint64_t count = 0;
  for (size_t i = 0; i + 1 < widths.size(); ++i) count += widths[i] * widths[i + 1] + widths[i + 1];
  return count;
}

// The MLP's tensors (names, shapes) in the packed order, as a v2 file names them.
inline std::vector<StateTensor> mlp_tensors(const std::vector<int64_t>& widths) {
  std::vector<StateTensor> out;
  const ParameterRegistry registry = mlp_parameters(widths);
  for (const ParameterTensor& t : registry.tensors()) out.push_back({t.name, t.shape});
  return out;
}

inline float float_from_bits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Random contents in every field; floats are random bit patterns, so NaN
// payloads, -0, infinities and subnormals all occur and must survive bitwise.
// format1: also what only format 1 keeps: any bytes in the activation
// (format 2 stores text, and the trainer's names are ASCII) and a NaN loss
// scale's payload (format 2 writes the scale as decimal text, so a NaN
// reads back as the canonical quiet NaN of its sign; no checkpoint holds
// one: validation refuses it).
inline TrainState random_state(std::mt19937_64& rng, int64_t max_width, bool format1 = false) {
  std::uniform_int_distribution<int64_t> width(1, max_width);
  std::uniform_int_distribution<int> layers(2, 5);
  TrainState s;
  const int n = layers(rng);
  for (int i = 0; i < n; ++i) s.model_dims.push_back(width(rng));
  static const char* kActivations[] = {"relu", "gelu"};
  static const char* kLosses[] = {"xent", "mse"};
  s.activation = kActivations[rng() % 2];
  s.loss = kLosses[rng() % 2];
  if (format1 && rng() % 4 == 0) s.activation += std::string("\0\xff\n", 3);  // any bytes survive
  s.tensors = mlp_tensors(s.model_dims);
  const bool adamw = rng() % 2 == 0;
  s.optimizer = adamw ? "adamw" : "sgd";
  s.optimizer_settings = {{"lr", std::to_string(rng() % 1000) + "e-5"}, {"weight-decay", "0"}};
  const uint64_t params = mlp_params(s.model_dims);
  for (uint64_t i = 0; i < params; ++i) {
    s.master_weights_fp32.push_back(float_from_bits(static_cast<uint32_t>(rng())));
    s.momentum_fp32.push_back(float_from_bits(static_cast<uint32_t>(rng())));
    if (adamw) s.second_moment_fp32.push_back(float_from_bits(static_cast<uint32_t>(rng())));
  }
  s.optimizer_steps = static_cast<int64_t>(rng());
  s.momentum_initialized = rng() % 2 == 1;
  const uint64_t scale_bits = rng();
  std::memcpy(&s.scaler.scale, &scale_bits, 8);
  if (!format1 && std::isnan(s.scaler.scale)) s.scaler.scale = std::copysign(std::nan(""), s.scaler.scale);
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

inline TrainState small_state(int64_t step) {
  TrainState s;
  s.model_dims = {3, 2, 2};
  s.activation = "relu";
  s.loss = "xent";
  s.tensors = mlp_tensors(s.model_dims);
  const uint64_t params = mlp_params(s.model_dims);
  for (uint64_t i = 0; i < params; ++i) {
    s.master_weights_fp32.push_back(0.25f * static_cast<float>(i) - 1.0f);
    s.momentum_fp32.push_back(-0.5f * static_cast<float>(i));
  }
  s.step = step;
  s.optimizer_steps = step;           // none skipped
  s.momentum_initialized = step > 0;  // a step that was not skipped set it
  s.seed = 42;
  s.run_id = 0x5eed0001;
  s.train_samples = 100;
  s.global_batch = 10;
  return s;
}

// `s` made a checkpoint of an MLP of these widths: tensors named, every
// buffer resized to its parameter count (new values `fill`).
inline void reshape_model(TrainState& s, const std::vector<int64_t>& widths, float fill = 0.0f) {
  s.model_dims = widths;
  s.tensors = mlp_tensors(widths);
  const size_t params = mlp_params(widths);
  s.master_weights_fp32.resize(params, fill);
  s.momentum_fp32.resize(params, fill);
  if (!s.second_moment_fp32.empty()) s.second_moment_fp32.resize(params, fill);
}

template <typename T>
bool same_bits(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

inline void expect_same_state(const TrainState& want, const TrainState& got) {
  EXPECT_EQ(want.model_kind, got.model_kind);
  EXPECT_TRUE(want.tensors == got.tensors || (want.tensors.empty() && got.format_version == 1));
  EXPECT_EQ(want.optimizer, got.optimizer);
  EXPECT_EQ(want.optimizer_steps, got.optimizer_steps);
  if (got.format_version != 1) {  // gtest's macros are if/else statements: braced
    EXPECT_EQ(want.optimizer_settings, got.optimizer_settings);
  }
  ASSERT_EQ(want.second_moment_fp32.size(), got.second_moment_fp32.size());
  for (size_t i = 0; i < want.second_moment_fp32.size(); ++i) {
    ASSERT_TRUE(same_bits(want.second_moment_fp32[i], got.second_moment_fp32[i])) << "exp_avg_sq " << i;
  }
  EXPECT_EQ(want.model_dims, got.model_dims);
  EXPECT_EQ(want.activation, got.activation);
  EXPECT_EQ(want.tokenizer, got.tokenizer);
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

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Rewrites the trailer (length and CRC) so a deliberately altered body passes
// the checksum and reaches the field decoder.
inline void reseal(std::vector<uint8_t>& bytes) {
  const uint64_t total = bytes.size();
  for (int i = 0; i < 8; ++i) bytes[bytes.size() - 12 + i] = static_cast<uint8_t>(total >> (8 * i));
  const uint32_t crc = static_cast<uint32_t>(crc32(0L, bytes.data(), static_cast<uInt>(bytes.size() - 4)));
  for (int i = 0; i < 4; ++i) bytes[bytes.size() - 4 + i] = static_cast<uint8_t>(crc >> (8 * i));
}

inline void put_u64(std::vector<uint8_t>& bytes, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) bytes[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

inline std::set<std::string> file_names_in(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.insert(entry.path().filename().string());
  return names;
}

// A unique directory per test, removed afterwards.
class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = make_temp_dir("ckpt");
    seed_ = test_seed();
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

}  // namespace ddp::test
