// test_weights_safetensors.cpp: the model's weights as one safetensors file
// (weights_io.h): saved FP32 under the registry's state_dict names and read
// back bitwise; F16/BF16 files widened exactly; a missing, extra or
// mis-shaped tensor refused in one line naming it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "support/data_file_support.h"
#include "support/temp_dir.h"
#include "support/test_support.h"
#include "trainer/io/safetensors.h"
#include "trainer/checkpoint/weights_io.h"
#include "trainer/models/mlp/mlp_config.h"

namespace ddp {
namespace {

// Fresh random widths and values in the flat layout; padding zero.
struct RandomModel {
  ParameterRegistry registry;
  std::vector<float> flat;
};
RandomModel random_model(std::mt19937_64& rng) {
  std::uniform_int_distribution<int64_t> width(1, 9);
  const int64_t in = width(rng), hidden = in + width(rng);  // 0.weight [hidden, in] is never square
  RandomModel m{mlp_parameters(std::vector<int64_t>{in, hidden, width(rng)}), {}};
  m.flat.assign(m.registry.flat_count(), 0.0f);
  for (const ParameterTensor& t : m.registry.tensors()) {
    const std::vector<float> v = test::random_floats(rng, t.count, -1, 1);
    std::copy(v.begin(), v.end(), m.flat.begin() + static_cast<std::ptrdiff_t>(t.offset));
  }
  return m;
}

TEST(WeightsSafetensors, PathSuffixChoosesTheForm) {
  EXPECT_TRUE(is_safetensors_path("w.safetensors"));
  EXPECT_TRUE(is_safetensors_path("/a/b/model.safetensors"));
  EXPECT_FALSE(is_safetensors_path("w"));
  EXPECT_FALSE(is_safetensors_path("w.safetensors/"));
  EXPECT_FALSE(is_safetensors_path(".safetensors"));
  EXPECT_FALSE(is_safetensors_path("w.safetensors.bak"));
}

TEST(WeightsSafetensors, SavedFileHoldsEveryTensorByNameAndLoadsBackBitwise) {
  std::mt19937_64 rng(test::test_seed());
  const RandomModel m = random_model(rng);
  const std::string path = test::temp_file("w.safetensors");
  save_weights(path, m.registry, m.flat);

  const SafetensorsFile f = read_safetensors(path);
  EXPECT_EQ(f.metadata.at("format"), "pt");
  ASSERT_EQ(f.tensors.size(), m.registry.size());
  for (size_t i = 0; i < m.registry.size(); ++i) {
    const ParameterTensor& t = m.registry[i];
    SCOPED_TRACE(t.name);
    EXPECT_EQ(f.tensors[i].name, t.name) << "registry order";
    EXPECT_EQ(f.tensors[i].dtype, SafetensorsDtype::F32);
    EXPECT_EQ(f.tensors[i].shape, t.shape);
    const std::vector<float> v = f.values_fp32(f.tensors[i]);
    for (size_t k = 0; k < t.count; ++k) ASSERT_EQ(test::bits_of(v[k]), test::bits_of(m.flat[t.offset + k]));
  }
  EXPECT_NE(f.find("0.weight"), nullptr);
  EXPECT_NE(f.find("2.bias"), nullptr);

  const std::vector<float> loaded = load_weights(path, m.registry);
  ASSERT_EQ(loaded.size(), m.flat.size());
  for (size_t k = 0; k < loaded.size(); ++k) ASSERT_EQ(test::bits_of(loaded[k]), test::bits_of(m.flat[k])) << k;
}

TEST(WeightsSafetensors, TheTokenizerIsRecordedAndAMismatchRefused) {
  std::mt19937_64 rng(test::test_seed());
  const RandomModel m = random_model(rng);
  const std::string gpt2 = test::temp_file("gpt2.safetensors");
  const std::string none = test::temp_file("none.safetensors");
  save_weights(gpt2, m.registry, m.flat, "gpt2");
  save_weights(none, m.registry, m.flat);
  EXPECT_EQ(read_safetensors(gpt2).metadata.at("tokenizer"), "gpt2");
  EXPECT_EQ(weights_tokenizer(gpt2), "gpt2");
  EXPECT_EQ(read_safetensors(none).metadata.count("tokenizer"), 0u);
  EXPECT_EQ(weights_tokenizer(none), "");
  EXPECT_EQ(weights_tokenizer(test::temp_file("npy_dir")), "");  // a .npy directory records nothing
  EXPECT_NO_THROW(check_weights_tokenizer(gpt2, "gpt2"));
  EXPECT_NO_THROW(check_weights_tokenizer(gpt2, ""));       // the run does not know its own
  EXPECT_NO_THROW(check_weights_tokenizer(none, "bytes"));  // the file does not say
  test::expect_data_error([&] { check_weights_tokenizer(gpt2, "bytes"); },
                          {gpt2 + ": the weights are of a model of gpt2 tokens, and this run's data is bytes tokens"});
  // A name no build knows is refused, not carried on.
  const std::string words = test::temp_file("words.safetensors");
  std::vector<SafetensorsTensorOut> out;
  for (const ParameterTensor& t : m.registry.tensors())
    out.push_back({t.name, SafetensorsDtype::F32, t.shape, reinterpret_cast<const uint8_t*>(m.flat.data() + t.offset),
                   t.count * sizeof(float)});
  write_safetensors(words, out, {{"tokenizer", "words"}}, "test");
  test::expect_data_error([&] { weights_tokenizer(words); }, {"metadata tokenizer 'words' is not bytes or gpt2"});
}

// The model's tensors re-encoded in `dtype` from their FP32 values' top bits
// (BF16) or by the F16 rounding; returns the values a loader must produce.
std::vector<float> write_narrow(const std::string& path, const RandomModel& m, SafetensorsDtype dtype) {
  std::vector<std::vector<uint8_t>> storage;
  std::vector<float> want(m.flat.size(), 0.0f);
  for (const ParameterTensor& t : m.registry.tensors()) {
    std::vector<uint8_t> bytes(2 * t.count);
    for (size_t k = 0; k < t.count; ++k) {
      const float x = m.flat[t.offset + k];
      uint16_t bits = 0;
      if (dtype == SafetensorsDtype::BF16) {
        bits = static_cast<uint16_t>(test::bits_of(x) >> 16);  // truncation: any 16 bits are a BF16
        const uint32_t wide = uint32_t{bits} << 16;
        std::memcpy(&want[t.offset + k], &wide, 4);
      } else {
        bits = float_to_half_bits_portable(x);
        want[t.offset + k] = half_bits_to_float_portable(bits);
      }
      bytes[2 * k] = static_cast<uint8_t>(bits);
      bytes[2 * k + 1] = static_cast<uint8_t>(bits >> 8);
    }
    storage.push_back(std::move(bytes));
  }
  std::vector<SafetensorsTensorOut> out;
  for (size_t i = 0; i < m.registry.size(); ++i)
    out.push_back({m.registry[i].name, dtype, m.registry[i].shape, storage[i].data(), storage[i].size()});
  write_safetensors(path, out, {}, "test");
  return want;
}

TEST(WeightsSafetensors, Fp16AndBf16FilesLoadConvertedExactly) {
  std::mt19937_64 rng(test::test_seed());
  const RandomModel m = random_model(rng);
  for (SafetensorsDtype dtype : {SafetensorsDtype::F16, SafetensorsDtype::BF16}) {
    SCOPED_TRACE(safetensors_dtype_name(dtype));
    const std::string path = test::temp_file(std::string(safetensors_dtype_name(dtype)) + ".safetensors");
    const std::vector<float> want = write_narrow(path, m, dtype);
    const std::vector<float> got = load_weights(path, m.registry);
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < got.size(); ++k) ASSERT_EQ(test::bits_of(got[k]), test::bits_of(want[k])) << k;
  }
}

// The model's tensors as FP32, with `edit` applied to the list first.
std::string write_edited(const std::string& name, const RandomModel& m,
                         const std::function<void(std::vector<SafetensorsTensorOut>&)>& edit,
                         std::vector<float>& storage) {
  storage = m.flat;
  std::vector<SafetensorsTensorOut> out;
  for (const ParameterTensor& t : m.registry.tensors())
    out.push_back({t.name, SafetensorsDtype::F32, t.shape, reinterpret_cast<const uint8_t*>(storage.data() + t.offset),
                   4 * t.count});
  edit(out);
  const std::string path = test::temp_file(name);
  write_safetensors(path, out, {}, "test");
  return path;
}

TEST(WeightsSafetensors, MissingExtraOrMisShapedTensorIsRefusedNamingIt) {
  std::mt19937_64 rng(test::test_seed());
  const RandomModel m = random_model(rng);
  std::vector<float> storage;
  const std::string missing = write_edited(
      "missing.safetensors", m,
      [](auto& out) {
        out.erase(std::find_if(out.begin(), out.end(), [](const auto& t) { return t.name == "2.bias"; }));
      },
      storage);
  test::expect_data_error([&] { load_weights(missing, m.registry); },
                          {"missing.safetensors", "tensor 2.bias", "missing", "0.weight ["});

  const std::vector<float> extra_values = test::random_floats(rng, 3);
  const std::string extra = write_edited(
      "extra.safetensors", m,
      [&](auto& out) {
        out.push_back(
            {"6.weight", SafetensorsDtype::F32, {3}, reinterpret_cast<const uint8_t*>(extra_values.data()), 12});
      },
      storage);
  test::expect_data_error([&] { load_weights(extra, m.registry); },
                          {"extra.safetensors", "tensor 6.weight", "not a tensor of this model"});

  // 0.weight transposed: the same element count, another shape.
  const std::string transposed = write_edited(
      "transposed.safetensors", m,
      [](auto& out) {
        for (auto& t : out)
          if (t.name == "0.weight") std::swap(t.shape[0], t.shape[1]);
      },
      storage);
  const ParameterTensor& w0 = m.registry[m.registry.find("0.weight")];
  test::expect_data_error([&] { load_weights(transposed, m.registry); },
                          {"transposed.safetensors", "tensor 0.weight", "shape [" + std::to_string(w0.shape[1]) + ", ",
                           "this model's is [" + std::to_string(w0.shape[0]) + ", "});
  const std::string flattened = write_edited(
      "flat.safetensors", m,
      [](auto& out) {
        for (auto& t : out)
          if (t.name == "2.weight") t.shape = {t.shape[0] * t.shape[1]};
      },
      storage);
  test::expect_data_error([&] { load_weights(flattened, m.registry); },
                          {"flat.safetensors", "tensor 2.weight", "shape ["});
}

// Weights to start from must be finite (every step would be skipped): a NaN
// or an Inf anywhere, in a safetensors file or a .npy directory, is one line
// naming the file, the tensor and the element.
TEST(WeightsSafetensors, ANonFiniteWeightIsRefusedNamingTheTensorAndElement) {
  std::mt19937_64 rng(test::test_seed());
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()}) {
    RandomModel m = random_model(rng);
    const ParameterTensor& t = m.registry[rng() % m.registry.size()];
    const size_t element = rng() % t.count;
    m.flat[t.offset + element] = bad;
    const test::TempDir temp_dir("bad_weights");
    const std::string& dir = temp_dir.path();
    const std::string file = dir + "/bad.safetensors";
    save_weights(file, m.registry, m.flat);
    const std::string tensor = "tensor " + t.name + ": non-finite value (" + (std::isnan(bad) ? "nan" : "inf") + ")";
    const std::string at = "at element " + std::to_string(element) + " ";
    test::expect_data_error([&] { load_weights(file, m.registry); }, {"bad.safetensors: ", tensor, at});
    save_weights(dir + "/npy", m.registry, m.flat);
    test::expect_data_error([&] { load_weights(dir + "/npy", m.registry); },
                            {t.file_stem + ".npy: ", "non-finite value", "flat index " + std::to_string(element)});
  }
}

}  // namespace
}  // namespace ddp
