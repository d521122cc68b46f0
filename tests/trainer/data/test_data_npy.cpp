// test_data_npy.cpp: the .npy reader (versions 1 to 3, the dtypes and header
// spellings numpy writes, gzipped files), its refusal of every bad header,
// shape, dtype and value with one line naming the file and the problem, and
// the .npy writer.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "support/data_file_support.h"
#include "trainer/io/data_file.h"
#include "trainer/data/dataset.h"
#include "trainer/data/npy_dataset.h"
#include "trainer/io/npy_io.h"

namespace ddp {
namespace {

using namespace test;  // data_file_support.h: file builders, expect_data_error

// ---- .npy -----------------------------------------------------------------------

TEST(DataNpy, ReadsF4FeaturesAndI8Labels) {
  const std::vector<float> x = {0.5f, -1.25f, 3.0f, 1e-30f, -0.0f, 7.0f};
  const std::string xp = write_temp("x.npy", npy_bytes(npy_dict("<f4", "(3, 2)"), le_bytes(x)));
  const std::string yp =
      write_temp("y.npy", npy_bytes(npy_dict("<i8", "(3,)"), le_bytes(std::vector<int64_t>{4, 0, 1})));
  const Dataset data = load_npy_dataset(xp, yp);
  EXPECT_EQ(data.count, 3u);
  EXPECT_EQ(data.features, 2u);
  EXPECT_EQ(data.x, x);
  EXPECT_EQ(data.labels, (std::vector<int32_t>{4, 0, 1}));
  EXPECT_EQ(data.num_classes, 5);
  EXPECT_TRUE(data.is_classification());
}

TEST(DataNpy, ReadsF8AndUnscaledU1FeaturesWithI4Labels) {
  const std::string yp = write_temp("y.npy", npy_bytes(npy_dict("<i4", "(2,)"), le_bytes(std::vector<int32_t>{1, 0})));
  const std::string f8 =
      write_temp("x8.npy", npy_bytes(npy_dict("<f8", "(2, 2)"), le_bytes(std::vector<double>{0.1, -2, 1e300, 4})));
  // 1e300 does not fit a float: reported as non-finite after conversion.
  expect_data_error([&] { load_npy_dataset(f8, yp); }, {f8, "non-finite value (inf) in sample 1, feature 0"});

  const std::string f8ok =
      write_temp("x8ok.npy", npy_bytes(npy_dict("<f8", "(2, 2)"), le_bytes(std::vector<double>{0.1, -2, 3, 4})));
  EXPECT_EQ(load_npy_dataset(f8ok, yp).x, (std::vector<float>{0.1f, -2.0f, 3.0f, 4.0f}));

  const std::string u1 = write_temp("xu1.npy", npy_bytes(npy_dict("|u1", "(2, 2)"), {0, 200, 255, 7}));
  const Dataset data = load_npy_dataset(u1, yp);
  EXPECT_EQ(data.x, (std::vector<float>{0, 200, 255, 7}));
  EXPECT_EQ(data.labels, (std::vector<int32_t>{1, 0}));
  EXPECT_EQ(data.num_classes, 2);
}

TEST(DataNpy, ReadsRegressionTargets) {
  const std::string xp = write_temp("x.npy", npy_bytes(npy_dict("<f4", "(2, 1)"), le_bytes(std::vector<float>{1, 2})));
  const std::string y2 =
      write_temp("y2.npy", npy_bytes(npy_dict("<f4", "(2, 3)"), le_bytes(std::vector<float>{1, 2, 3, 4, 5, 6})));
  const Dataset data = load_npy_dataset(xp, y2);
  EXPECT_FALSE(data.is_classification());
  EXPECT_EQ(data.target_dim, 3u);
  EXPECT_EQ(data.targets, (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(data.num_classes, 0);

  const std::string y1 =
      write_temp("y1.npy", npy_bytes(npy_dict("<f8", "(2,)"), le_bytes(std::vector<double>{-1.5, 2.5})));
  const Dataset one = load_npy_dataset(xp, y1);
  EXPECT_EQ(one.target_dim, 1u);
  EXPECT_EQ(one.targets, (std::vector<float>{-1.5f, 2.5f}));
}

TEST(DataNpy, ReadsVersions2And3AndOtherHeaderSpellings) {
  const Bytes data = le_bytes(std::vector<float>{1, 2, 3, 4, 5, 6});
  for (int major : {2, 3}) {
    const NpyArray a = parse_npy(npy_bytes(npy_dict("<f4", "(2, 3)"), data, major), "v.npy");
    EXPECT_EQ(a.shape, (std::vector<size_t>{2, 3}));
    EXPECT_EQ(npy_values_as_float(a), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  }
  // Python 2 longs, double quotes, other key order, no trailing comma.
  const NpyArray py2 =
      parse_npy(npy_bytes("{\"shape\": (2L, 3L), \"fortran_order\": False, \"descr\": \"<f4\"}", data), "p.npy");
  EXPECT_EQ(py2.shape, (std::vector<size_t>{2, 3}));
  const NpyArray scalar = parse_npy(npy_bytes(npy_dict("<f4", "()"), le_bytes(std::vector<float>{9})), "s.npy");
  EXPECT_TRUE(scalar.shape.empty());
  EXPECT_EQ(npy_values_as_float(scalar), (std::vector<float>{9}));
  const NpyArray empty = parse_npy(npy_bytes(npy_dict("<f4", "(0, 3)"), {}), "e.npy");
  EXPECT_EQ(empty.count(), 0u);
}

TEST(DataNpy, ReadsGzippedNpy) {
  const std::string xp =
      write_temp("x.npy.gz", gzip(npy_bytes(npy_dict("<f4", "(1, 2)"), le_bytes(std::vector<float>{1, 2}))));
  const std::string yp = write_temp("y.npy", npy_bytes(npy_dict("<i4", "(1,)"), le_bytes(std::vector<int32_t>{0})));
  EXPECT_EQ(load_npy_dataset(xp, yp).x, (std::vector<float>{1, 2}));
}

TEST(DataNpyErrors, BadMagicVersionAndTruncation) {
  const Bytes good = npy_bytes(npy_dict("<f4", "(2,)"), le_bytes(std::vector<float>{1, 2}));
  Bytes magic = good;
  magic[1] = 'X';
  expect_data_error([&] { parse_npy(magic, "m.npy"); }, {"m.npy", "magic"});
  expect_data_error([&] { parse_npy(text_bytes("PK\x03\x04"), "zip.npy"); }, {"zip.npy", "magic"});
  Bytes version = good;
  version[6] = 4;
  expect_data_error([&] { parse_npy(version, "v.npy"); }, {"v.npy", "version 4.0"});
  expect_data_error([&] { parse_npy(Bytes(good.begin(), good.begin() + 4), "t.npy"); }, {"t.npy", "truncated"});
  expect_data_error([&] { parse_npy(Bytes(good.begin(), good.begin() + 9), "t.npy"); }, {"t.npy", "truncated"});
  expect_data_error([&] { parse_npy(Bytes(good.begin(), good.begin() + 40), "t.npy"); },
                    {"t.npy", "truncated npy header"});
  expect_data_error([&] { parse_npy(Bytes(good.begin(), good.end() - 1), "t.npy"); },
                    {"t.npy", "truncated npy file", "(2,)", "needs 8 data bytes, file has 7"});
  Bytes trailing = good;
  trailing.push_back(0);
  expect_data_error([&] { parse_npy(trailing, "t.npy"); }, {"t.npy", "trailing"});
  const std::string missing = temp_file("missing.npy");
  expect_data_error([&] { read_npy(missing); }, {missing, "cannot open"});
}

// Found by tests/fuzz/fuzz_npy.cpp: an empty buffer's null data() went to
// memcmp (undefined behaviour, reported by UBSan in DDP_SANITIZE builds).
TEST(DataNpyErrors, EmptyFileIsTruncated) {
  expect_data_error([&] { parse_npy(Bytes{}, "empty.npy"); }, {"empty.npy", "truncated npy file: 0 bytes"});
  expect_data_error([&] { read_npy(write_temp("empty.npy", {})); }, {"empty.npy", "truncated"});
}

TEST(DataNpyErrors, BadHeader) {
  const Bytes f = le_bytes(std::vector<float>{1, 2});
  for (const std::string& dict :
       {std::string("{'descr': '<f4', 'fortran_order': False}"),
        std::string("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}"),
        std::string("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}"),
        std::string("{'descr': '<f4', 'fortran_order': false, 'shape': (2,)}"),
        std::string("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}"),
        std::string("{'descr': '<f4', 'fortran_order': False, 'shape': (2,,)}"),
        std::string("{'descr': '<f4' 'fortran_order': False, 'shape': (2,)}"),
        std::string("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} junk"),
        std::string("{'descr: '<f4', 'fortran_order': False, 'shape': (2,)}"), std::string("not a dict\n")}) {
    SCOPED_TRACE(dict);
    expect_data_error([&] { parse_npy(npy_bytes(dict, f), "h.npy"); }, {"h.npy", "bad npy header"});
  }
}

TEST(DataNpyErrors, FortranOrderAndDtypes) {
  const Bytes f = le_bytes(std::vector<float>{1, 2, 3, 4});
  expect_data_error([&] { parse_npy(npy_bytes(npy_dict("<f4", "(2, 2)", "True"), f), "f.npy"); },
                    {"f.npy", "fortran_order"});
  expect_data_error([&] { parse_npy(npy_bytes(npy_dict(">f4", "(4,)"), f), "b.npy"); },
                    {"b.npy", "dtype", "big-endian"});
  expect_data_error([&] { parse_npy(npy_bytes(npy_dict("<f2", "(8,)"), f), "h.npy"); },
                    {"h.npy", "unsupported dtype '<f2'"});
  expect_data_error(
      [&] { parse_npy(npy_bytes("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (4,), }", f), "s.npy"); },
      {"s.npy", "dtype"});
}

TEST(DataNpyErrors, DatasetShapesDtypesAndCounts) {
  const std::string x =
      write_temp("x.npy", npy_bytes(npy_dict("<f4", "(2, 2)"), le_bytes(std::vector<float>{1, 2, 3, 4})));
  const std::string y = write_temp("y.npy", npy_bytes(npy_dict("<i4", "(2,)"), le_bytes(std::vector<int32_t>{0, 1})));
  const std::string x1 =
      write_temp("x1.npy", npy_bytes(npy_dict("<f4", "(4,)"), le_bytes(std::vector<float>{1, 2, 3, 4})));
  const std::string xi =
      write_temp("xi.npy", npy_bytes(npy_dict("<i4", "(2, 2)"), le_bytes(std::vector<int32_t>{1, 2, 3, 4})));
  const std::string y2 =
      write_temp("y2.npy", npy_bytes(npy_dict("<i4", "(2, 1)"), le_bytes(std::vector<int32_t>{0, 1})));
  const std::string y3 =
      write_temp("y3.npy", npy_bytes(npy_dict("<i4", "(3,)"), le_bytes(std::vector<int32_t>{0, 1, 2})));
  const std::string yu = write_temp("yu.npy", npy_bytes(npy_dict("|u1", "(2,)"), {0, 1}));
  const std::string yf3 =
      write_temp("yf3.npy", npy_bytes(npy_dict("<f4", "(2, 1, 1)"), le_bytes(std::vector<float>{0, 1})));
  const std::string yneg =
      write_temp("yneg.npy", npy_bytes(npy_dict("<i8", "(2,)"), le_bytes(std::vector<int64_t>{0, -3})));
  const std::string ybig =
      write_temp("ybig.npy", npy_bytes(npy_dict("<i8", "(2,)"), le_bytes(std::vector<int64_t>{0, int64_t{1} << 40})));
  expect_data_error([&] { load_npy_dataset(x1, y); }, {x1, "shape (4,)", "2-D"});
  expect_data_error([&] { load_npy_dataset(xi, y); }, {xi, "dtype '<i4'"});
  expect_data_error([&] { load_npy_dataset(x, y2); }, {y2, "shape (2, 1)"});
  expect_data_error([&] { load_npy_dataset(x, yf3); }, {yf3, "shape (2, 1, 1)"});
  expect_data_error([&] { load_npy_dataset(x, yu); }, {yu, "dtype '|u1'"});
  expect_data_error([&] { load_npy_dataset(x, y3); }, {y3, "mismatch", "3 labels", "2 samples"});
  expect_data_error([&] { load_npy_dataset(x, yneg); }, {yneg, "bad label -3 in sample 1"});
  expect_data_error([&] { load_npy_dataset(x, ybig); }, {ybig, "bad label 1099511627776"});
}

// Found by probing tests/fuzz/fuzz_npy.cpp with the int32 limits: label
// 2^31 - 1 was accepted and num_classes = label + 1 overflowed an int
// (UBSan). The largest label is now 2^31 - 2.
TEST(DataNpyErrors, LabelInt32MaxIsRefused) {
  const std::string x = write_temp("x.npy", npy_bytes(npy_dict("<f4", "(1, 1)"), le_bytes(std::vector<float>{1})));
  const int32_t max = std::numeric_limits<int32_t>::max();
  const std::string ymax =
      write_temp("ymax.npy", npy_bytes(npy_dict("<i4", "(1,)"), le_bytes(std::vector<int32_t>{max})));
  expect_data_error([&] { load_npy_dataset(x, ymax); }, {ymax, "bad label 2147483647 in sample 0", "[0, 2^31 - 1)"});
  const std::string ylast =
      write_temp("ylast.npy", npy_bytes(npy_dict("<i8", "(1,)"), le_bytes(std::vector<int64_t>{max - 1})));
  EXPECT_EQ(load_npy_dataset(x, ylast).num_classes, max);
}

TEST(DataNpyErrors, NonFiniteValuesNameSampleAndColumn) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::string xn = write_temp(
      "xn.npy", npy_bytes(npy_dict("<f4", "(2, 4)"), le_bytes(std::vector<float>{0, 0, 0, 0, 0, 0, nan, 0})));
  const std::string x = write_temp("x.npy", npy_bytes(npy_dict("<f4", "(2, 1)"), le_bytes(std::vector<float>{1, 2})));
  const std::string y = write_temp("y.npy", npy_bytes(npy_dict("<i4", "(2,)"), le_bytes(std::vector<int32_t>{0, 1})));
  const std::string yi =
      write_temp("yi.npy", npy_bytes(npy_dict("<f4", "(2, 2)"), le_bytes(std::vector<float>{0, 1, 2, -inf})));
  expect_data_error([&] { load_npy_dataset(xn, y); }, {xn + ": non-finite value (nan) in sample 1, feature 2"});
  expect_data_error([&] { load_npy_dataset(x, yi); }, {yi + ": non-finite value (-inf) in sample 1, target 1"});
}

TEST(DataNpyWriter, RoundTripIsBitwise) {
  std::mt19937_64 rng(test::test_seed());
  std::vector<float> values = test::random_floats(rng, 15, -1e6f, 1e6f);
  values[0] = -0.0f;
  values[1] = std::numeric_limits<float>::denorm_min();
  values[2] = std::numeric_limits<float>::max();
  const std::string path = temp_file("w.npy");
  save_npy_fp32(path, values.data(), {3, 5});
  const std::vector<float> back = load_npy_fp32(path, {3, 5});
  ASSERT_EQ(back.size(), values.size());
  EXPECT_EQ(std::memcmp(back.data(), values.data(), 4 * values.size()), 0);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(DataNpyWriter, HeaderBytesAreNumpyV1) {
  for (const auto& [shape, shape_text] :
       {std::pair{std::vector<size_t>{3, 5}, std::string("(3, 5)")},
        std::pair{std::vector<size_t>{7}, std::string("(7,)")}, std::pair{std::vector<size_t>{}, std::string("()")},
        std::pair{std::vector<size_t>{2, 3, 4}, std::string("(2, 3, 4)")}}) {
    SCOPED_TRACE(shape_text);
    size_t count = 1;
    for (size_t d : shape) count *= d;
    const std::vector<float> values(count, 1.5f);
    const std::string path = temp_file("h.npy");
    save_npy_fp32(path, values.data(), shape);
    const Bytes bytes = read_file_bytes(path);
    ASSERT_GE(bytes.size(), 10u);
    EXPECT_EQ(std::memcmp(bytes.data(), "\x93NUMPY\x01\x00", 8), 0);
    const size_t header_len = bytes[8] | size_t{bytes[9]} << 8;
    EXPECT_EQ((10 + header_len) % 64, 0u);
    ASSERT_EQ(bytes.size(), 10 + header_len + 4 * count);
    const std::string header(bytes.begin() + 10, bytes.begin() + 10 + header_len);
    const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape_text + ", }";
    EXPECT_EQ(header.substr(0, dict.size()), dict);
    EXPECT_EQ(header.back(), '\n');
    EXPECT_EQ(header.find_first_not_of(' ', dict.size()), header_len - 1);
    // 1.5f = 0x3fc00000, stored little-endian.
    EXPECT_EQ(bytes[10 + header_len + 3], 0x3f);
    EXPECT_EQ(bytes[10 + header_len + 2], 0xc0);
  }
}

TEST(DataNpyWriter, LoadChecksShapeDtypeAndValues) {
  const std::vector<float> values = {1, 2, 3, 4, 5, 6};
  const std::string path = temp_file("w.npy");
  save_npy_fp32(path, values.data(), {2, 3});
  expect_data_error([&] { load_npy_fp32(path, {3, 2}); }, {path, "shape mismatch", "file has (2, 3), expected (3, 2)"});
  expect_data_error([&] { load_npy_fp32(path, {6}); }, {path, "shape mismatch"});

  const std::string f8 =
      write_temp("f8.npy", npy_bytes(npy_dict("<f8", "(2,)"), le_bytes(std::vector<double>{0.25, -8})));
  EXPECT_EQ(load_npy_fp32(f8, {2}), (std::vector<float>{0.25f, -8.0f}));
  const std::string i4 = write_temp("i4.npy", npy_bytes(npy_dict("<i4", "(2,)"), le_bytes(std::vector<int32_t>{1, 2})));
  expect_data_error([&] { load_npy_fp32(i4, {2}); }, {i4, "dtype '<i4'"});
  const std::vector<float> bad = {1, std::numeric_limits<float>::quiet_NaN()};
  const std::string nan_path = temp_file("nan.npy");
  save_npy_fp32(nan_path, bad.data(), {2});
  expect_data_error([&] { load_npy_fp32(nan_path, {2}); }, {nan_path, "non-finite", "index 1"});
}

TEST(DataNpyWriter, UnwritablePathIsDataError) {
  const float one = 1;
  const std::string path = temp_file("no-such-dir/w.npy");
  expect_data_error([&] { save_npy_fp32(path, &one, {1}); }, {path, "cannot write"});
}

}  // namespace
}  // namespace ddp
