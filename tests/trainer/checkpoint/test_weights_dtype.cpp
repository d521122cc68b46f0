// test_weights_dtype.cpp: --save-weights-dtype (weights_dtype.h): the
// weights written in FP16 or BF16 are each FP32 master rounded once to
// nearest even (the conversions' own tested rules), read back by
// --init-weights' readers as exactly those values widened, as one
// safetensors file and as a Hugging Face GPT-2 directory (whose
// config.json names the dtype); FP16 falls back to FP32, saying which
// tensor, where a weight would round to Inf; names outside the three are
// refused naming the flag.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "kernels/bfloat16.h"
#include "kernels/error.h"
#include "kernels/half.h"
#include "support/temp_dir.h"
#include "support/test_support.h"
#include "trainer/checkpoint/hf_gpt2.h"
#include "trainer/checkpoint/weights_dtype.h"
#include "trainer/checkpoint/weights_io.h"
#include "trainer/io/safetensors.h"
#include "trainer/models/gpt/gpt_config.h"
#include "trainer/models/mlp/mlp_config.h"

namespace ddp {
namespace {

// Fresh values for every tensor of `registry` over a wide range of
// magnitudes (FP16's subnormals to 1e4), padding zero.
std::vector<float> random_flat(const ParameterRegistry& registry, std::mt19937_64& rng) {
  std::vector<float> flat(registry.flat_count(), 0.0f);
  std::uniform_real_distribution<float> exponent(-20.0f, 13.0f), sign(-1.0f, 1.0f);
  for (const ParameterTensor& t : registry.tensors())
    for (size_t i = 0; i < t.count; ++i) flat[t.offset + i] = std::copysign(std::exp2(exponent(rng)), sign(rng));
  return flat;
}

float rounded(float v, SafetensorsDtype dtype) {
  if (dtype == SafetensorsDtype::F16) return half_to_float(to_half(v));
  if (dtype == SafetensorsDtype::BF16) return bfloat16_to_float(to_bfloat16(v));
  return v;
}

// Mismatches between `got` and each tensor's values of `flat` rounded to `dtype`, bit for bit.
int mismatches(const ParameterRegistry& registry, const std::vector<float>& flat, const std::vector<float>& got,
               SafetensorsDtype dtype) {
  int bad = 0;
  for (const ParameterTensor& t : registry.tensors())
    for (size_t i = 0; i < t.count; ++i)
      bad += float_to_bits(got[t.offset + i]) != float_to_bits(rounded(flat[t.offset + i], dtype));
  return bad;
}

TEST(WeightsDtype, BytesAreEachValueRoundedOnce) {
  std::mt19937_64 rng(test::test_seed());
  const std::vector<float> v = test::random_floats(rng, 1001, -70000.0f, 70000.0f);
  for (SafetensorsDtype dtype : {SafetensorsDtype::F32, SafetensorsDtype::F16, SafetensorsDtype::BF16}) {
    const std::vector<uint8_t> bytes = weights_bytes(v.data(), v.size(), dtype);
    ASSERT_EQ(bytes.size(), v.size() * safetensors_dtype_bytes(dtype));
    int bad = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      if (dtype == SafetensorsDtype::F32) {
        bad += std::memcmp(bytes.data() + 4 * i, &v[i], 4) != 0;
        continue;
      }
      uint16_t bits = 0;
      std::memcpy(&bits, bytes.data() + 2 * i, 2);
      bad += bits != (dtype == SafetensorsDtype::F16 ? to_half(v[i]).bits : to_bfloat16(v[i]).bits);
    }
    EXPECT_EQ(bad, 0) << safetensors_dtype_name(dtype);
  }
}

TEST(WeightsDtype, ASafetensorsFileInEachDtypeReadsBackAsItsRoundedValues) {
  std::mt19937_64 rng(test::test_seed());
  const ParameterRegistry registry = mlp_parameters(std::vector<int64_t>{7, 12, 5});
  const std::vector<float> flat = random_flat(registry, rng);
  const test::TempDir dir("weights_dtype");
  for (SafetensorsDtype dtype : {SafetensorsDtype::F32, SafetensorsDtype::F16, SafetensorsDtype::BF16}) {
    const std::string path = dir.path() + "/w" + safetensors_dtype_name(dtype) + ".safetensors";
    save_weights(path, registry, flat, "", dtype);
    const SafetensorsFile file = read_safetensors(path);
    for (const SafetensorsTensor& t : file.tensors) EXPECT_EQ(t.dtype, dtype) << t.name;
    EXPECT_EQ(mismatches(registry, flat, load_weights(path, registry), dtype), 0) << safetensors_dtype_name(dtype);
  }
}

TEST(WeightsDtype, AHuggingFaceDirectoryInBf16NamesItsDtypeAndReadsBack) {
  std::mt19937_64 rng(test::test_seed());
  GptConfig gpt;
  gpt.n_layer = 1;
  gpt.n_head = 2;
  gpt.n_embd = 16;
  gpt.block_size = 8;
  gpt.vocab_size = 64;
  gpt.real_vocab = 60;
  const ParameterRegistry registry = gpt_parameters(gpt);
  std::vector<float> flat = random_flat(registry, rng);
  for (const ParameterTensor& t : registry.tensors())  // the padding rows of wte are not written: zero them
    if (t.name == "transformer.wte.weight")
      std::fill(flat.begin() + static_cast<std::ptrdiff_t>(t.offset + 60 * 16),
                flat.begin() + static_cast<std::ptrdiff_t>(t.offset + t.count), 0.0f);
  const test::TempDir dir("weights_dtype_hf");
  save_hf_gpt2(dir.path(), registry, flat, gpt.n_head, gpt.real_vocab, "", SafetensorsDtype::BF16);
  std::ifstream config(hf_gpt2_output_files(dir.path())[0]);
  const std::string text((std::istreambuf_iterator<char>(config)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("\"torch_dtype\": \"bfloat16\""), std::string::npos) << text;
  for (const SafetensorsTensor& t : read_safetensors(hf_gpt2_output_files(dir.path())[1]).tensors)
    EXPECT_EQ(t.dtype, SafetensorsDtype::BF16) << t.name;
  EXPECT_EQ(mismatches(registry, flat, load_weights(dir.path(), registry), SafetensorsDtype::BF16), 0);
}

TEST(WeightsDtype, Fp16FallsBackToFp32WhereAWeightWouldBeInf) {
  std::mt19937_64 rng(test::test_seed());
  const ParameterRegistry registry = mlp_parameters(std::vector<int64_t>{4, 6, 3});
  std::vector<float> flat = random_flat(registry, rng);
  std::string note;
  EXPECT_EQ(dtype_that_holds(registry, flat, SafetensorsDtype::F16, note), SafetensorsDtype::F16);
  EXPECT_EQ(note, "");
  const ParameterTensor& last = registry.tensors().back();
  flat[last.offset + last.count - 1] = 65520.0f;  // the first float that rounds to FP16's Inf
  EXPECT_EQ(dtype_that_holds(registry, flat, SafetensorsDtype::F16, note), SafetensorsDtype::F32);
  EXPECT_NE(note.find(last.name), std::string::npos) << note;
  EXPECT_NE(note.find("fp32 instead"), std::string::npos) << note;
  EXPECT_EQ(dtype_that_holds(registry, flat, SafetensorsDtype::BF16, note), SafetensorsDtype::BF16);
  EXPECT_EQ(note, "");
  flat[last.offset + last.count - 1] = 65519.0f;  // rounds to 65504: kept in FP16
  EXPECT_EQ(dtype_that_holds(registry, flat, SafetensorsDtype::F16, note), SafetensorsDtype::F16);
}

TEST(WeightsDtype, NamesAreTheFlagsValues) {
  EXPECT_EQ(weights_dtype_named("fp32"), SafetensorsDtype::F32);
  EXPECT_EQ(weights_dtype_named("fp16"), SafetensorsDtype::F16);
  EXPECT_EQ(weights_dtype_named("bf16"), SafetensorsDtype::BF16);
  for (const char* bad : {"f16", "BF16", "", "float32"}) EXPECT_THROW(weights_dtype_named(bad), Error) << bad;
  EXPECT_STREQ(torch_dtype_name(SafetensorsDtype::BF16), "bfloat16");
  EXPECT_STREQ(torch_dtype_name(SafetensorsDtype::F16), "float16");
  EXPECT_STREQ(torch_dtype_name(SafetensorsDtype::F32), "float32");
}

}  // namespace
}  // namespace ddp
