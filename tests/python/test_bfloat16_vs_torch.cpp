// test_bfloat16_vs_torch.cpp: our float -> bfloat16 conversion (bfloat16.h)
// against PyTorch's (tests/python/torch_bfloat16_bits.py: the values'
// `.to(torch.bfloat16)`, scalar and vectorised paths agreeing) bit for bit
// on every value that is not a NaN: zeros, infinities, the largest finite
// value and the floats around its rounding boundary, FP32 subnormals, every
// tie between neighbouring bfloat16 values in a spread of exponents and one
// FP32 step either side, and fresh random floats of every class. NaNs
// compare as a class: PyTorch's NaN bits depend on its path (0x7fc0 scalar,
// 0xffff vectorised), ours keep the input's sign. Skipped when
// /usr/bin/python3 has no torch (the script exits 77).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <vector>

#include "kernels/bfloat16.h"
#include "support/temp_dir.h"
#include "support/test_support.h"

namespace ddp::test {
namespace {

float float_of_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

std::vector<float> test_values(uint64_t seed) {
  std::vector<float> v = {0.0f,
                          -0.0f,
                          1.0f,
                          -1.0f,
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(),
                          -std::numeric_limits<float>::quiet_NaN(),
                          float_of_bits(0x7f800001u),
                          std::numeric_limits<float>::max(),
                          -std::numeric_limits<float>::max(),
                          kBfloat16Max,
                          std::numeric_limits<float>::min(),
                          std::numeric_limits<float>::denorm_min()};
  for (uint32_t bits : {0x7f7f7fffu, 0x7f7f8000u, 0x7f7f8001u, 0x00008000u, 0x00018000u, 0x007fffffu, 0x00400000u})
    for (uint32_t sign : {0u, 0x80000000u}) v.push_back(float_of_bits(sign | bits));
  // Every tie in a spread of exponents (subnormal to huge), each kept
  // mantissa, with its FP32 neighbours.
  for (uint32_t exponent : {0u, 1u, 2u, 60u, 126u, 127u, 128u, 200u, 254u})
    for (uint32_t mantissa = 0; mantissa < 128; ++mantissa)
      for (uint32_t sign : {0u, 0x80000000u}) {
        const uint32_t tie = sign | (exponent << 23) | (mantissa << 16) | 0x8000u;
        for (uint32_t bits : {tie - 1, tie, tie + 1}) v.push_back(float_of_bits(bits));
      }
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 20000; ++i) v.push_back(float_of_bits(static_cast<uint32_t>(rng())));
  return v;
}

TEST(Bfloat16VsTorch, ConversionsMatchPyTorchBitForBit) {
  const TempDir temp("bf16_vs_torch");
  const std::string in = temp.path() + "/values.f32", out = temp.path() + "/torch.bf16";
  const std::vector<float> values = test_values(test_seed());
  std::ofstream(in, std::ios::binary)
      .write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * 4));
  const std::string python = std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
  const CommandResult ran =
      run_command(python + " " + DDP_SOURCE_DIR "/tests/python/torch_bfloat16_bits.py " + in + " " + out + " 2>&1");
  if (ran.exit_code == 77) GTEST_SKIP() << ran.output;
  ASSERT_EQ(ran.exit_code, 0) << ran.output;
  std::ifstream file(out, std::ios::binary);
  const std::vector<char> bytes{std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
  ASSERT_EQ(bytes.size(), values.size() * 2);
  int differ = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    uint16_t theirs = 0;
    std::memcpy(&theirs, bytes.data() + 2 * i, 2);
    const uint16_t ours = to_bfloat16(values[i]).bits;
    const bool both_nan =
        std::isnan(values[i]) && std::isnan(bfloat16_bits_to_float(ours)) && std::isnan(bfloat16_bits_to_float(theirs));
    if (!both_nan && ours != theirs && ++differ <= 5)
      ADD_FAILURE() << "float bits 0x" << std::hex << float_to_bits(values[i]) << ": ours 0x" << ours
                    << ", PyTorch's 0x" << theirs;
  }
  EXPECT_EQ(differ, 0) << "of " << values.size() << " values (" << ran.output << ")";
}

}  // namespace
}  // namespace ddp::test
