// test_safetensors.cpp: the safetensors reader and writer
// (trainer/io/safetensors.h): a round trip of fresh random tensors,
// F16 and BF16 widened exactly, and every malformed header refused with one
// line naming the file and the tensor. Interop with the reference
// implementation is tests/python/test_safetensors_interop.py.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "support/data_file_support.h"
#include "kernels/half_convert.h"
#include "support/test_support.h"
#include "trainer/io/safetensors.h"
#include "trainer/io/input_file.h"

namespace ddp {
namespace {
using test::Bytes;

// A file from a header written by hand and a buffer.
Bytes file_bytes(const std::string& header, const Bytes& buffer) {
  Bytes out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(header.size() >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), buffer.begin(), buffer.end());
  return out;
}

Bytes random_bytes(std::mt19937_64& rng, size_t n) {
  Bytes b(n);
  for (uint8_t& x : b) x = static_cast<uint8_t>(rng());
  return b;
}

uint64_t header_size_of(const Bytes& file) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | file[static_cast<size_t>(i)];
  return n;
}

void set_header_size(Bytes& file, uint64_t n) {
  for (int i = 0; i < 8; ++i) file[static_cast<size_t>(i)] = static_cast<uint8_t>(n >> (8 * i));
}

TEST(Safetensors, Fp32RoundTripKeepsNamesShapesOrderMetadataAndBits) {
  std::mt19937_64 rng(test::test_seed());
  std::uniform_int_distribution<int> dim(0, 7);
  // Shapes of every rank, a scalar and an empty tensor among them.
  const std::vector<std::vector<int64_t>> shapes = {
      {dim(rng) + 1, dim(rng) + 1}, {dim(rng) + 1}, {}, {0, 3}, {2, dim(rng) + 1, 3}};
  std::vector<std::vector<float>> values;
  std::vector<SafetensorsTensorOut> out;
  for (size_t i = 0; i < shapes.size(); ++i) {
    size_t count = 1;
    for (int64_t d : shapes[i]) count *= static_cast<size_t>(d);
    values.push_back(test::random_floats(rng, count, -4, 4));
  }
  // Names out of alphabetical order: the writer keeps the given order.
  const std::vector<std::string> names = {"2.weight", "2.bias", "scale", "empty", "0.weight"};
  for (size_t i = 0; i < shapes.size(); ++i)
    out.push_back({names[i], SafetensorsDtype::F32, shapes[i], reinterpret_cast<const uint8_t*>(values[i].data()),
                   values[i].size() * 4});
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"note", std::to_string(rng())}};
  const std::string path = test::temp_file("w.safetensors");
  write_safetensors(path, out, metadata, "test weights");

  const SafetensorsFile f = read_safetensors(path);
  EXPECT_EQ(header_size_of(f.bytes) % 8, 0u) << "header padded to a multiple of 8";
  EXPECT_EQ(f.bytes[8], '{');
  EXPECT_EQ(f.metadata, metadata);
  ASSERT_EQ(f.tensors.size(), names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    SCOPED_TRACE(names[i]);
    EXPECT_EQ(f.tensors[i].name, names[i]) << "buffer order is the written order";
    EXPECT_EQ(f.tensors[i].dtype, SafetensorsDtype::F32);
    EXPECT_EQ(f.tensors[i].shape, shapes[i]);
    const std::vector<float> got = f.values_fp32(f.tensors[i]);
    ASSERT_EQ(got.size(), values[i].size());
    for (size_t k = 0; k < got.size(); ++k) EXPECT_EQ(test::bits_of(got[k]), test::bits_of(values[i][k]));
  }
  EXPECT_EQ(f.find("scale"), &f.tensors[2]);
  EXPECT_EQ(f.find("missing"), nullptr);
}

TEST(Safetensors, Fp16AndBf16AreWidenedExactly) {
  std::mt19937_64 rng(test::test_seed());
  const size_t count = 64;
  Bytes f16 = random_bytes(rng, 2 * count), bf16 = random_bytes(rng, 2 * count);
  f16[0] = 0x00;
  f16[1] = 0x7c;  // +Inf, and a subnormal next
  f16[2] = 0x01;
  f16[3] = 0x00;
  const std::string header =
      "{\"h\":{\"dtype\":\"F16\",\"shape\":[8,8],\"data_offsets\":[0,128]},"
      "\"b\":{\"dtype\":\"BF16\",\"shape\":[64],\"data_offsets\":[128,256]}}";
  Bytes buffer = f16;
  buffer.insert(buffer.end(), bf16.begin(), bf16.end());
  const SafetensorsFile f = parse_safetensors(file_bytes(header, buffer), "x.safetensors");

  // References: the bulk F16 converter (F16C where the CPU has it), and
  // BF16 as the top 16 bits of an FP32.
  std::vector<lowp16> halves(count);
  std::memcpy(halves.data(), f16.data(), f16.size());
  std::vector<float> want_h(count);
  half_to_float_array(halves.data(), want_h.data(), count);
  const std::vector<float> got_h = f.values_fp32(*f.find("h")), got_b = f.values_fp32(*f.find("b"));
  ASSERT_EQ(got_h.size(), count);
  ASSERT_EQ(got_b.size(), count);
  for (size_t i = 0; i < count; ++i) {
    // A signalling NaN widens to a NaN; F16C sets its quiet bit, the
    // portable routine keeps the payload as is: both NaN is what counts.
    if (std::isnan(want_h[i]))
      EXPECT_TRUE(std::isnan(got_h[i])) << "F16 element " << i;
    else
      EXPECT_EQ(test::bits_of(got_h[i]), test::bits_of(want_h[i])) << "F16 element " << i;
    const uint32_t want_b = (uint32_t{bf16[2 * i]} | uint32_t{bf16[2 * i + 1]} << 8) << 16;
    EXPECT_EQ(test::bits_of(got_b[i]), want_b) << "BF16 element " << i;
  }
  EXPECT_TRUE(std::isinf(got_h[0]));
  EXPECT_EQ(got_h[1], std::ldexp(1.0f, -24));
}

TEST(Safetensors, HeaderPaddedWithSpacesAndTensorsInAnyHeaderOrderAreRead) {
  std::mt19937_64 rng(test::test_seed());
  const Bytes buffer = random_bytes(rng, 24 + 8);
  // Listed out of buffer order, the reference writer's habit (it sorts by
  // dtype alignment, then name).
  const std::string header =
      "{\"__metadata__\":{\"format\":\"pt\"},"
      "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[24,32]},"
      "\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}     ";
  const SafetensorsFile f = parse_safetensors(file_bytes(header, buffer), "x.safetensors");
  ASSERT_EQ(f.tensors.size(), 2u);
  EXPECT_EQ(f.tensors[0].name, "a");
  EXPECT_EQ(f.tensors[1].name, "b");
  EXPECT_EQ(f.metadata.at("format"), "pt");
}

struct BadCase {
  const char* what;
  std::string header;  // for the 24 + 8 byte buffer of 0.weight [2, 3] and 0.bias [2], both F32
  std::vector<std::string> needles;
};

std::string entry(const std::string& name, const std::string& dtype, const std::string& shape,
                  const std::string& offsets) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":" + offsets + "}";
}
const std::string kBias = entry("0.bias", "F32", "[2]", "[24,32]");

TEST(Safetensors, EveryMalformedHeaderIsRefusedInOneLineNamingFileAndTensor) {
  std::mt19937_64 rng(test::test_seed());
  const Bytes buffer = random_bytes(rng, 32);
  const std::string deep = "{\"x\":{\"dtype\":[[[[[[1]]]]]]}}";
  const std::vector<BadCase> cases = {
      {"the example",
       "{" + entry("0.weight", "F32", "[2,3]", "[0,10]") + "," + kBias + "}",
       {"w.safetensors: tensor 0.weight: data_offsets [0, 10) hold 10 bytes, shape [2, 3] in F32 needs 24"}},
      {"not JSON", "{\"0.weight\": {\"dtype\": F32}}", {"w.safetensors", "not valid JSON"}},
      {"not an object", "[1, 2, 3]", {"w.safetensors", "not an object"}},
      {"duplicate",
       "{" + entry("0.weight", "F32", "[2,3]", "[0,24]") + "," + entry("0.weight", "F32", "[2]", "[24,32]") + "}",
       {"tensor 0.weight", "twice"}},
      {"entry not an object", "{\"0.weight\": [0, 24]," + kBias + "}", {"tensor 0.weight", "not an object"}},
      {"no dtype",
       "{\"0.weight\":{\"shape\":[2,3],\"data_offsets\":[0,24]}," + kBias + "}",
       {"tensor 0.weight", "no dtype"}},
      {"unknown field",
       "{\"0.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24],\"stride\":[3,1]}," + kBias + "}",
       {"tensor 0.weight", "stride"}},
      {"F64",
       "{" + entry("0.weight", "F64", "[3]", "[0,24]") + "," + kBias + "}",
       {"tensor 0.weight", "F64", "not supported"}},
      {"I32",
       "{" + entry("0.weight", "F32", "[2,3]", "[0,24]") + "," + entry("0.bias", "I32", "[2]", "[24,32]") + "}",
       {"tensor 0.bias", "I32"}},
      {"negative dim",
       "{" + entry("0.weight", "F32", "[-2,3]", "[0,24]") + "," + kBias + "}",
       {"tensor 0.weight", "non-negative"}},
      {"fractional dim",
       "{" + entry("0.weight", "F32", "[2.5,3]", "[0,24]") + "," + kBias + "}",
       {"tensor 0.weight", "shape"}},
      {"shape not a list",
       "{" + entry("0.weight", "F32", "6", "[0,24]") + "," + kBias + "}",
       {"tensor 0.weight", "shape"}},
      {"huge shape",
       "{" + entry("0.weight", "F32", "[4294967296,4294967296,16]", "[0,24]") + "," + kBias + "}",
       {"tensor 0.weight", "more bytes"}},
      {"three offsets",
       "{" + entry("0.weight", "F32", "[2,3]", "[0,12,24]") + "," + kBias + "}",
       {"tensor 0.weight", "data_offsets"}},
      {"negative offset",
       "{" + entry("0.weight", "F32", "[2,3]", "[-24,0]") + "," + kBias + "}",
       {"tensor 0.weight", "data_offsets"}},
      {"reversed",
       "{" + entry("0.weight", "F32", "[0]", "[24,0]") + "," + kBias + "}",
       {"tensor 0.weight", "end before"}},
      {"past the end",
       "{" + entry("0.weight", "F32", "[2,3]", "[0,24]") + "," + entry("0.bias", "F32", "[4]", "[24,40]") + "}",
       {"tensor 0.bias", "past the end", "32-byte buffer"}},
      {"overlap",
       "{" + entry("0.weight", "F32", "[2,3]", "[0,24]") + "," + entry("0.bias", "F32", "[4]", "[16,32]") + "}",
       {"tensor 0.bias", "overlap", "tensor 0.weight"}},
      {"hole",
       "{" + entry("0.weight", "F32", "[2,2]", "[0,16]") + "," + kBias + "}",
       {"bytes [16, 24)", "no tensor", "0.weight", "0.bias"}},
      {"hole at the start",
       "{" + entry("0.weight", "F32", "[2,2]", "[8,24]") + "," + kBias + "}",
       {"bytes [0, 8)", "before tensor 0.weight"}},
      {"bytes after the tensors", "{" + entry("0.weight", "F32", "[2,3]", "[0,24]") + "}", {"32 bytes", "end at 24"}},
      {"metadata not an object",
       "{\"__metadata__\":[1]," + entry("0.weight", "F32", "[2,3]", "[0,24]") + "," + kBias + "}",
       {"__metadata__", "not an object"}},
      {"metadata value a number",
       "{\"__metadata__\":{\"step\":3}," + entry("0.weight", "F32", "[2,3]", "[0,24]") + "," + kBias + "}",
       {"__metadata__ 'step'", "not a string"}},
      {"deep nesting", deep, {"w.safetensors", "nested deeper"}},
      // Found by fuzz_safetensors: nlohmann throws out_of_range, not parse_error, for it.
      {"number beyond a double",
       "{" + entry("0.weight", "F32", "[1e400,3]", "[0,24]") + "," + kBias + "}",
       {"w.safetensors", "number out of range"}},
      // nlohmann's parser takes a NUL for the end of input: in the padding it passed (a checkpoint's flipped byte).
      {"NUL in the padding",
       "{" + entry("0.weight", "F32", "[2,3]", "[0,24]") + "," + kBias + "}" + std::string(1, '\0') + "  ",
       {"w.safetensors", "NUL byte"}},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.what);
    try {
      parse_safetensors(file_bytes(c.header, buffer), "w.safetensors");
      ADD_FAILURE() << "accepted";
    } catch (const DataError& e) {
      const std::string message = e.what();
      for (const std::string& needle : c.needles)
        EXPECT_NE(message.find(needle), std::string::npos) << "'" << needle << "' not in: " << message;
      EXPECT_EQ(message.rfind("w.safetensors: ", 0), 0u) << message;
      EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    }
  }
}

TEST(Safetensors, HeaderSizesThatLieAreRefusedBeforeParsing) {
  std::mt19937_64 rng(test::test_seed());
  const std::string header = "{" + entry("0.weight", "F32", "[2,3]", "[0,24]") + "," + kBias + "}";
  const Bytes good = file_bytes(header, random_bytes(rng, 32));
  ASSERT_NO_THROW(parse_safetensors(good, "w.safetensors"));
  test::expect_data_error([&] { parse_safetensors(Bytes(good.begin(), good.begin() + 5), "w.safetensors"); },
                          {"w.safetensors", "5 bytes", "8-byte header size"});
  Bytes beyond = good;
  set_header_size(beyond, good.size() - 7);  // N one byte past the file's end
  test::expect_data_error([&] { parse_safetensors(beyond, "w.safetensors"); }, {"w.safetensors", "past the end"});
  Bytes huge = good;
  set_header_size(huge, uint64_t{1} << 62);
  test::expect_data_error([&] { parse_safetensors(huge, "w.safetensors"); }, {"w.safetensors", "cap"});
  // A truncated file: the header is whole, the buffer is not.
  test::expect_data_error([&] { parse_safetensors(Bytes(good.begin(), good.end() - 1), "w.safetensors"); },
                          {"tensor 0.bias", "past the end", "31-byte buffer"});
}

// read_safetensors checks the header against the file's size before it
// reads the buffer: a file larger than this machine's memory (sparse: no
// disk used) whose header covers 56 bytes is refused for its header, not
// read or refused for its size; so is one whose header size is zero.
TEST(Safetensors, AFileWhoseHeaderLiesIsRefusedBeforeItsBufferIsRead) {
  std::mt19937_64 rng(test::test_seed());
  const std::string header = "{" + entry("0.weight", "F32", "[2,3]", "[0,24]") + "," + kBias + "}";
  const std::string padded = test::write_temp("padded.safetensors", file_bytes(header, random_bytes(rng, 32)));
  const uintmax_t huge = uintmax_t{physical_memory_bytes()} + (uintmax_t{1} << 30);
  std::filesystem::resize_file(padded, huge);
  test::expect_data_error([&] { read_safetensors(padded); }, {"padded.safetensors", "tensors end at 32"});
  const std::string zeros = test::write_temp("zeros.safetensors", Bytes(8, 0));
  std::filesystem::resize_file(zeros, huge);
  test::expect_data_error([&] { read_safetensors(zeros); }, {"zeros.safetensors", "JSON"});
  std::filesystem::remove(padded);
  std::filesystem::remove(zeros);
}

TEST(Safetensors, ReadNamesTheFileWhenItIsMissingOrNotRegular) {
  const std::string missing = test::temp_file("nothing.safetensors");
  test::expect_data_error([&] { read_safetensors(missing); }, {"nothing.safetensors"});
  const std::string dir = test::temp_file("");
  test::expect_data_error([&] { read_safetensors(dir); }, {"not a regular file"});
}

}  // namespace
}  // namespace ddp
