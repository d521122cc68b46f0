// test_data_readers.cpp: the data-loading layer. Every fixture is built in
// memory by the test (IDX, .npy and CSV bytes, gzipped with zlib where that
// matters) and written into a per-test temporary directory; every bad input
// must raise DataError with one line naming the file and the problem.
#include <gtest/gtest.h>
#include <zlib.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "test_support.h"
#include "trainer/csv_reader.h"
#include "trainer/data_error.h"
#include "trainer/data_file.h"
#include "trainer/dataset.h"
#include "trainer/idx_reader.h"
#include "trainer/npy_io.h"
#include "trainer/synthetic_data.h"

namespace ddp {
namespace {

using Bytes = std::vector<uint8_t>;

// ---- fixtures -----------------------------------------------------------------

// One fresh directory per test (tests run in parallel under ctest), removed
// when the process exits.
std::string temp_file(const std::string& name) {
  struct Dirs {
    std::string test_name, current;
    std::vector<std::string> all;
    ~Dirs() {
      std::error_code ignored;
      for (const std::string& dir : all) std::filesystem::remove_all(dir, ignored);
    }
  };
  static Dirs dirs;
  const std::string test_name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  if (dirs.current.empty() || dirs.test_name != test_name) {
    dirs.test_name = test_name;
    dirs.current = test::make_temp_dir("data");
    dirs.all.push_back(dirs.current);
  }
  return (std::filesystem::path(dirs.current) / name).string();
}

void write_bytes(const std::string& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

std::string write_temp(const std::string& name, const Bytes& bytes) {
  const std::string path = temp_file(name);
  write_bytes(path, bytes);
  return path;
}

Bytes text_bytes(const std::string& text) { return Bytes(text.begin(), text.end()); }

Bytes gzip(const Bytes& raw) {
  z_stream s{};
  EXPECT_EQ(deflateInit2(&s, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  Bytes out(deflateBound(&s, raw.size()) + 64);
  s.next_in = const_cast<Bytef*>(raw.data());
  s.avail_in = static_cast<uInt>(raw.size());
  s.next_out = out.data();
  s.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&s, Z_FINISH), Z_STREAM_END);
  out.resize(s.total_out);
  deflateEnd(&s);
  return out;
}

// IDX: 0, 0, dtype, ndim, big-endian dims, data.
Bytes idx_bytes(const std::vector<uint32_t>& dims, const Bytes& data, uint8_t dtype = 0x08) {
  Bytes out = {0, 0, dtype, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(d >> shift));
  }
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

// .npy with a hand-written header dict, padded like numpy's.
Bytes npy_bytes(const std::string& dict, const Bytes& data, int major = 1) {
  const size_t length_bytes = major == 1 ? 2 : 4;
  std::string header = dict;
  while ((8 + length_bytes + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  Bytes out = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<uint8_t>(major), 0};
  for (size_t i = 0; i < length_bytes; ++i) out.push_back(static_cast<uint8_t>(header.size() >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

std::string npy_dict(const std::string& descr, const std::string& shape, const char* order = "False") {
  return "{'descr': '" + descr + "', 'fortran_order': " + order + ", 'shape': " + shape + ", }";
}

template <typename T>
Bytes le_bytes(const std::vector<T>& values) {  // the test machine is little-endian (x86-64, arm64)
  Bytes out(values.size() * sizeof(T));
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

// Runs `load`, which must throw DataError whose one-line message contains
// every needle.
void expect_data_error(const std::function<void()>& load, std::initializer_list<std::string> needles) {
  try {
    load();
    ADD_FAILURE() << "no DataError thrown";
  } catch (const DataError& e) {
    const std::string message = e.what();
    for (const std::string& needle : needles) EXPECT_NE(message.find(needle), std::string::npos) << "missing '" << needle << "' in: " << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << "not one line: " << message;
  }
}

// 3 images of 2x2 pixels and their labels.
const Bytes kPixels = {0, 255, 51, 102, 1, 2, 3, 4, 254, 253, 128, 0};
const Bytes kLabels = {0, 2, 1};

void expect_small_idx(const Dataset& data) {
  EXPECT_EQ(data.count, 3u);
  EXPECT_EQ(data.features, 4u);
  ASSERT_EQ(data.x.size(), 12u);
  for (size_t i = 0; i < kPixels.size(); ++i) EXPECT_EQ(data.x[i], static_cast<float>(kPixels[i]) / 255.0f) << i;
  EXPECT_EQ(data.labels, (std::vector<int32_t>{0, 2, 1}));
  EXPECT_EQ(data.num_classes, 3);
  EXPECT_TRUE(data.is_classification());
  EXPECT_TRUE(data.targets.empty());
}

// ---- IDX ----------------------------------------------------------------------

TEST(DataIdx, ReadsPlainIdx3AndScalesPixels) {
  const std::string images = write_temp("images-idx3-ubyte", idx_bytes({3, 2, 2}, kPixels));
  const std::string labels = write_temp("labels-idx1-ubyte", idx_bytes({3}, kLabels));
  expect_small_idx(load_idx_dataset(images, labels));
}

TEST(DataIdx, ReadsGzippedFiles) {
  const std::string images = write_temp("images-idx3-ubyte.gz", gzip(idx_bytes({3, 2, 2}, kPixels)));
  const std::string labels = write_temp("labels-idx1-ubyte.gz", gzip(idx_bytes({3}, kLabels)));
  expect_small_idx(load_idx_dataset(images, labels));
}

TEST(DataIdx, ReadsIdx2Images) {
  const std::string images = write_temp("images-idx2", idx_bytes({3, 4}, kPixels));
  const std::string labels = write_temp("labels-idx1", idx_bytes({3}, kLabels));
  expect_small_idx(load_idx_dataset(images, labels));
}

TEST(DataIdx, ParseIdxReturnsDimsAndBytes) {
  const IdxArray array = parse_idx(idx_bytes({3, 2, 2}, kPixels), "mem");
  EXPECT_EQ(array.dims, (std::vector<size_t>{3, 2, 2}));
  EXPECT_EQ(array.data, kPixels);
}

TEST(DataIdx, GunzipsConcatenatedMembers) {
  Bytes two = gzip(text_bytes("hello, "));
  const Bytes second = gzip(text_bytes("world"));
  two.insert(two.end(), second.begin(), second.end());
  EXPECT_EQ(gunzip_bytes(two, "mem"), text_bytes("hello, world"));
}

TEST(DataIdx, GunzipsLargeInput) {
  std::mt19937_64 rng(test::test_seed());
  Bytes raw(3 << 20);  // larger than the first output guess for random data
  for (auto& b : raw) b = static_cast<uint8_t>(rng() % 7);
  EXPECT_EQ(gunzip_bytes(gzip(raw), "mem"), raw);
}

TEST(DataIdxErrors, MissingFile) {
  const std::string labels = write_temp("labels", idx_bytes({3}, kLabels));
  const std::string missing = temp_file("no-such-images.gz");
  expect_data_error([&] { load_idx_dataset(missing, labels); }, {missing, "cannot open", "No such file"});
  const std::string dir = std::filesystem::path(labels).parent_path().string();
  expect_data_error([&] { read_idx_file(dir); }, {dir, "not a regular file (a directory)"});
}

TEST(DataIdxErrors, TruncatedData) {
  const Bytes cut(kPixels.begin(), kPixels.begin() + 5);
  const std::string images = write_temp("images", idx_bytes({3, 2, 2}, cut));
  const std::string labels = write_temp("labels", idx_bytes({3}, kLabels));
  expect_data_error([&] { load_idx_dataset(images, labels); },
                    {images + ": truncated IDX file: header says 3x2x2 = 12 bytes of data, file has 5"});
}

TEST(DataIdxErrors, TruncatedHeader) {
  Bytes header = idx_bytes({3, 2, 2}, {});
  header.resize(9);
  expect_data_error([&] { parse_idx(header, "t.idx"); }, {"t.idx", "truncated IDX header", "16"});
  expect_data_error([&] { parse_idx({0, 0}, "t.idx"); }, {"t.idx", "truncated"});
  expect_data_error([&] { parse_idx({}, "t.idx"); }, {"t.idx", "truncated"});
}

TEST(DataIdxErrors, HugeDimsAreTruncationNotOverflow) {
  expect_data_error([&] { parse_idx(idx_bytes({0xffffffff, 0xffffffff, 0xffffffff}, {1, 2}), "h.idx"); },
                    {"h.idx", "truncated"});
}

TEST(DataIdxErrors, BadMagic) {
  Bytes bytes = idx_bytes({3}, kLabels);
  bytes[0] = 'P';
  bytes[1] = 'K';
  const std::string labels = write_temp("labels", bytes);
  const std::string images = write_temp("images", idx_bytes({3, 2, 2}, kPixels));
  expect_data_error([&] { load_idx_dataset(images, labels); }, {labels, "magic"});
}

TEST(DataIdxErrors, UnsupportedDtype) {
  expect_data_error([&] { parse_idx(idx_bytes({1}, {0, 0, 0, 0}, 0x0D), "f.idx"); }, {"f.idx", "dtype", "0x0d", "float32"});
}

TEST(DataIdxErrors, ZeroNdim) { expect_data_error([&] { parse_idx({0, 0, 8, 0}, "z.idx"); }, {"z.idx", "magic", "ndim"}); }

TEST(DataIdxErrors, UnexpectedNdim) {
  const std::string images = write_temp("images", idx_bytes({3, 2, 2}, kPixels));
  const std::string labels = write_temp("labels", idx_bytes({3}, kLabels));
  const std::string images1 = write_temp("images1", idx_bytes({12}, kPixels));
  const std::string labels2 = write_temp("labels2", idx_bytes({3, 1}, kLabels));
  expect_data_error([&] { load_idx_dataset(images1, labels); }, {images1, "magic", "ndim 1"});
  expect_data_error([&] { load_idx_dataset(images, labels2); }, {labels2, "magic", "ndim 2"});
}

TEST(DataIdxErrors, CountMismatch) {
  const std::string images = write_temp("images", idx_bytes({3, 2, 2}, kPixels));
  const std::string labels = write_temp("labels", idx_bytes({2}, {0, 1}));
  expect_data_error([&] { load_idx_dataset(images, labels); }, {labels, "mismatch", "2 labels", "3 images"});
}

TEST(DataIdxErrors, TrailingBytes) {
  Bytes bytes = idx_bytes({3}, kLabels);
  bytes.push_back(7);
  expect_data_error([&] { parse_idx(bytes, "l.idx"); }, {"l.idx", "trailing"});
}

TEST(DataIdxErrors, CorruptGzip) {
  const Bytes good = gzip(idx_bytes({3, 2, 2}, kPixels));
  Bytes bad_method = good;
  bad_method[2] = 7;  // compression method 7: not deflate
  const std::string p1 = write_temp("method.gz", bad_method);
  expect_data_error([&] { read_idx_file(p1); }, {p1, "corrupt gzip"});

  Bytes bad_crc = good;
  bad_crc[bad_crc.size() - 6] ^= 0xff;  // inside the CRC32 trailer
  const std::string p2 = write_temp("crc.gz", bad_crc);
  expect_data_error([&] { read_idx_file(p2); }, {p2, "corrupt gzip"});

  Bytes junk = good;
  junk.push_back(0);
  expect_data_error([&] { gunzip_bytes(junk, "j.gz"); }, {"j.gz", "corrupt gzip", "trailing"});
}

TEST(DataIdxErrors, TruncatedGzip) {
  const Bytes good = gzip(idx_bytes({3, 2, 2}, kPixels));
  const std::string path = write_temp("cut.gz", Bytes(good.begin(), good.begin() + good.size() / 2));
  expect_data_error([&] { read_idx_file(path); }, {path, "truncated gzip"});
  expect_data_error([&] { gunzip_bytes({0x1f, 0x8b}, "m.gz"); }, {"m.gz", "gzip"});
}

TEST(DataIdxFashionMnist, LoadsTrainAndTest) {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  if (!std::filesystem::exists(dir + "/train-images-idx3-ubyte.gz")) GTEST_SKIP() << dir << " not installed";
  const auto start = std::chrono::steady_clock::now();
  const Dataset train = load_fashion_mnist(dir, true);
  const Dataset test = load_fashion_mnist(dir, false);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  RecordProperty("load_seconds", std::to_string(seconds));
  // Release builds take ~0.5 s on one core; the bound leaves room for
  // sanitizer and debug builds while still catching a per-byte I/O loop.
  EXPECT_LT(seconds, 10.0);

  for (const Dataset* data : {&train, &test}) {
    EXPECT_EQ(data->features, 784u);
    EXPECT_EQ(data->num_classes, 10);
    ASSERT_EQ(data->x.size(), data->count * 784);
    std::vector<size_t> per_class(10, 0);
    for (int32_t label : data->labels) {
      ASSERT_GE(label, 0);
      ASSERT_LT(label, 10);
      ++per_class[label];
    }
    // Fashion-MNIST is balanced: 6000 / 1000 per class.
    for (size_t c = 0; c < 10; ++c) EXPECT_EQ(per_class[c], data->count / 10) << "class " << c;
    float lo = 1, hi = 0;
    for (float v : data->x) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    EXPECT_EQ(lo, 0.0f);
    EXPECT_EQ(hi, 1.0f);
    EXPECT_NO_THROW(validate_dataset(*data, "fashion"));
  }
  EXPECT_EQ(train.count, 60000u);
  EXPECT_EQ(test.count, 10000u);
  EXPECT_EQ(train.labels[0], 9);  // the first training image is an ankle boot
}

// ---- .npy -----------------------------------------------------------------------

TEST(DataNpy, ReadsF4FeaturesAndI8Labels) {
  const std::vector<float> x = {0.5f, -1.25f, 3.0f, 1e-30f, -0.0f, 7.0f};
  const std::string xp = write_temp("x.npy", npy_bytes(npy_dict("<f4", "(3, 2)"), le_bytes(x)));
  const std::string yp = write_temp("y.npy", npy_bytes(npy_dict("<i8", "(3,)"), le_bytes(std::vector<int64_t>{4, 0, 1})));
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
  const std::string f8 = write_temp("x8.npy", npy_bytes(npy_dict("<f8", "(2, 2)"), le_bytes(std::vector<double>{0.1, -2, 1e300, 4})));
  // 1e300 does not fit a float: reported as non-finite after conversion.
  expect_data_error([&] { load_npy_dataset(f8, yp); }, {f8, "non-finite value (inf) in sample 1, feature 0"});

  const std::string f8ok = write_temp("x8ok.npy", npy_bytes(npy_dict("<f8", "(2, 2)"), le_bytes(std::vector<double>{0.1, -2, 3, 4})));
  EXPECT_EQ(load_npy_dataset(f8ok, yp).x, (std::vector<float>{0.1f, -2.0f, 3.0f, 4.0f}));

  const std::string u1 = write_temp("xu1.npy", npy_bytes(npy_dict("|u1", "(2, 2)"), {0, 200, 255, 7}));
  const Dataset data = load_npy_dataset(u1, yp);
  EXPECT_EQ(data.x, (std::vector<float>{0, 200, 255, 7}));
  EXPECT_EQ(data.labels, (std::vector<int32_t>{1, 0}));
  EXPECT_EQ(data.num_classes, 2);
}

TEST(DataNpy, ReadsRegressionTargets) {
  const std::string xp = write_temp("x.npy", npy_bytes(npy_dict("<f4", "(2, 1)"), le_bytes(std::vector<float>{1, 2})));
  const std::string y2 = write_temp("y2.npy", npy_bytes(npy_dict("<f4", "(2, 3)"), le_bytes(std::vector<float>{1, 2, 3, 4, 5, 6})));
  const Dataset data = load_npy_dataset(xp, y2);
  EXPECT_FALSE(data.is_classification());
  EXPECT_EQ(data.target_dim, 3u);
  EXPECT_EQ(data.targets, (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(data.num_classes, 0);

  const std::string y1 = write_temp("y1.npy", npy_bytes(npy_dict("<f8", "(2,)"), le_bytes(std::vector<double>{-1.5, 2.5})));
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
  const NpyArray py2 = parse_npy(npy_bytes("{\"shape\": (2L, 3L), \"fortran_order\": False, \"descr\": \"<f4\"}", data), "p.npy");
  EXPECT_EQ(py2.shape, (std::vector<size_t>{2, 3}));
  const NpyArray scalar = parse_npy(npy_bytes(npy_dict("<f4", "()"), le_bytes(std::vector<float>{9})), "s.npy");
  EXPECT_TRUE(scalar.shape.empty());
  EXPECT_EQ(npy_values_as_float(scalar), (std::vector<float>{9}));
  const NpyArray empty = parse_npy(npy_bytes(npy_dict("<f4", "(0, 3)"), {}), "e.npy");
  EXPECT_EQ(empty.count(), 0u);
}

TEST(DataNpy, ReadsGzippedNpy) {
  const std::string xp = write_temp("x.npy.gz", gzip(npy_bytes(npy_dict("<f4", "(1, 2)"), le_bytes(std::vector<float>{1, 2}))));
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
  expect_data_error([&] { parse_npy(Bytes(good.begin(), good.begin() + 40), "t.npy"); }, {"t.npy", "truncated npy header"});
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
  for (const std::string& dict : {std::string("{'descr': '<f4', 'fortran_order': False}"),
                                  std::string("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}"),
                                  std::string("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}"),
                                  std::string("{'descr': '<f4', 'fortran_order': false, 'shape': (2,)}"),
                                  std::string("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}"),
                                  std::string("{'descr': '<f4', 'fortran_order': False, 'shape': (2,,)}"),
                                  std::string("{'descr': '<f4' 'fortran_order': False, 'shape': (2,)}"),
                                  std::string("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} junk"),
                                  std::string("{'descr: '<f4', 'fortran_order': False, 'shape': (2,)}"),
                                  std::string("not a dict\n")}) {
    SCOPED_TRACE(dict);
    expect_data_error([&] { parse_npy(npy_bytes(dict, f), "h.npy"); }, {"h.npy", "bad npy header"});
  }
}

TEST(DataNpyErrors, FortranOrderAndDtypes) {
  const Bytes f = le_bytes(std::vector<float>{1, 2, 3, 4});
  expect_data_error([&] { parse_npy(npy_bytes(npy_dict("<f4", "(2, 2)", "True"), f), "f.npy"); }, {"f.npy", "fortran_order"});
  expect_data_error([&] { parse_npy(npy_bytes(npy_dict(">f4", "(4,)"), f), "b.npy"); }, {"b.npy", "dtype", "big-endian"});
  expect_data_error([&] { parse_npy(npy_bytes(npy_dict("<f2", "(8,)"), f), "h.npy"); }, {"h.npy", "unsupported dtype '<f2'"});
  expect_data_error([&] { parse_npy(npy_bytes("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (4,), }", f), "s.npy"); },
                    {"s.npy", "dtype"});
}

TEST(DataNpyErrors, DatasetShapesDtypesAndCounts) {
  const std::string x = write_temp("x.npy", npy_bytes(npy_dict("<f4", "(2, 2)"), le_bytes(std::vector<float>{1, 2, 3, 4})));
  const std::string y = write_temp("y.npy", npy_bytes(npy_dict("<i4", "(2,)"), le_bytes(std::vector<int32_t>{0, 1})));
  const std::string x1 = write_temp("x1.npy", npy_bytes(npy_dict("<f4", "(4,)"), le_bytes(std::vector<float>{1, 2, 3, 4})));
  const std::string xi = write_temp("xi.npy", npy_bytes(npy_dict("<i4", "(2, 2)"), le_bytes(std::vector<int32_t>{1, 2, 3, 4})));
  const std::string y2 = write_temp("y2.npy", npy_bytes(npy_dict("<i4", "(2, 1)"), le_bytes(std::vector<int32_t>{0, 1})));
  const std::string y3 = write_temp("y3.npy", npy_bytes(npy_dict("<i4", "(3,)"), le_bytes(std::vector<int32_t>{0, 1, 2})));
  const std::string yu = write_temp("yu.npy", npy_bytes(npy_dict("|u1", "(2,)"), {0, 1}));
  const std::string yf3 = write_temp("yf3.npy", npy_bytes(npy_dict("<f4", "(2, 1, 1)"), le_bytes(std::vector<float>{0, 1})));
  const std::string yneg = write_temp("yneg.npy", npy_bytes(npy_dict("<i8", "(2,)"), le_bytes(std::vector<int64_t>{0, -3})));
  const std::string ybig = write_temp("ybig.npy", npy_bytes(npy_dict("<i8", "(2,)"), le_bytes(std::vector<int64_t>{0, int64_t{1} << 40})));
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
  const std::string ymax = write_temp("ymax.npy", npy_bytes(npy_dict("<i4", "(1,)"), le_bytes(std::vector<int32_t>{max})));
  expect_data_error([&] { load_npy_dataset(x, ymax); }, {ymax, "bad label 2147483647 in sample 0", "[0, 2^31 - 1)"});
  const std::string ylast = write_temp("ylast.npy", npy_bytes(npy_dict("<i8", "(1,)"), le_bytes(std::vector<int64_t>{max - 1})));
  EXPECT_EQ(load_npy_dataset(x, ylast).num_classes, max);
}

TEST(DataNpyErrors, NonFiniteValuesNameSampleAndColumn) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::string xn = write_temp("xn.npy", npy_bytes(npy_dict("<f4", "(2, 4)"), le_bytes(std::vector<float>{0, 0, 0, 0, 0, 0, nan, 0})));
  const std::string x = write_temp("x.npy", npy_bytes(npy_dict("<f4", "(2, 1)"), le_bytes(std::vector<float>{1, 2})));
  const std::string y = write_temp("y.npy", npy_bytes(npy_dict("<i4", "(2,)"), le_bytes(std::vector<int32_t>{0, 1})));
  const std::string yi = write_temp("yi.npy", npy_bytes(npy_dict("<f4", "(2, 2)"), le_bytes(std::vector<float>{0, 1, 2, -inf})));
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
  for (const auto& [shape, shape_text] : {std::pair{std::vector<size_t>{3, 5}, std::string("(3, 5)")},
                                          std::pair{std::vector<size_t>{7}, std::string("(7,)")},
                                          std::pair{std::vector<size_t>{}, std::string("()")},
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

  const std::string f8 = write_temp("f8.npy", npy_bytes(npy_dict("<f8", "(2,)"), le_bytes(std::vector<double>{0.25, -8})));
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

// ---- CSV ------------------------------------------------------------------------

TEST(DataCsv, ParsesHeaderRowsAndTrailingBlankLines) {
  const Dataset data = parse_csv("f0,f1,label\n1,2,0\n3.5, -4e-1 ,2\r\n+0.25,1e3,1\n\n \n", "d.csv");
  EXPECT_EQ(data.count, 3u);
  EXPECT_EQ(data.features, 2u);
  EXPECT_EQ(data.x, (std::vector<float>{1, 2, 3.5f, -0.4f, 0.25f, 1000}));
  EXPECT_EQ(data.labels, (std::vector<int32_t>{0, 2, 1}));
  EXPECT_EQ(data.num_classes, 3);
  EXPECT_TRUE(data.is_classification());
}

TEST(DataCsv, ParsesWithoutHeaderOrFinalNewline) {
  const Dataset data = parse_csv("1,2,3,4\n5,6,7,8", "d.csv");
  EXPECT_EQ(data.count, 2u);
  EXPECT_EQ(data.features, 3u);
  EXPECT_EQ(data.labels, (std::vector<int32_t>{4, 8}));
  EXPECT_EQ(data.num_classes, 9);
}

TEST(DataCsv, LoadsFileAndGzippedFile) {
  const std::string text = "a,b,y\n0.5,1,1\n2,3,0\n";
  const std::string plain = write_temp("d.csv", text_bytes(text));
  const std::string gz = write_temp("d.csv.gz", gzip(text_bytes(text)));
  for (const std::string& path : {plain, gz}) {
    const Dataset data = load_csv_dataset(path);
    EXPECT_EQ(data.x, (std::vector<float>{0.5f, 1, 2, 3}));
    EXPECT_EQ(data.labels, (std::vector<int32_t>{1, 0}));
  }
  const std::string missing = temp_file("missing.csv");
  expect_data_error([&] { load_csv_dataset(missing); }, {missing, "cannot open"});
}

TEST(DataCsvErrors, RaggedRowsNameTheLine) {
  expect_data_error([&] { parse_csv("a,b,y\n1,2,0\n1,2\n", "r.csv"); }, {"r.csv", "line 3", "expected 3 fields, found 2"});
  expect_data_error([&] { parse_csv("1,2,0\n1,2,0,4\n", "r.csv"); }, {"r.csv", "line 2", "found 4"});
  expect_data_error([&] { parse_csv("1,2,0\n\n1,2,0\n", "r.csv"); }, {"r.csv", "line 2", "blank line"});
}

TEST(DataCsvErrors, NonNumericFieldNamesLineAndColumn) {
  expect_data_error([&] { parse_csv("a,b,y\n1,2,0\n1,x2,1\n", "n.csv"); }, {"n.csv: line 3, column 2: non-numeric field 'x2'"});
  expect_data_error([&] { parse_csv("a,b,y\n1,,0\n", "n.csv"); }, {"n.csv", "line 2, column 2", "non-numeric"});
}

TEST(DataCsvErrors, BadLabels) {
  expect_data_error([&] { parse_csv("1,2,0.5\n", "l.csv"); }, {"l.csv", "line 1, column 3", "label '0.5'"});
  expect_data_error([&] { parse_csv("1,2,-1\n", "l.csv"); }, {"l.csv", "label '-1'"});
  expect_data_error([&] { parse_csv("1,2,1e12\n", "l.csv"); }, {"l.csv", "label"});
}

// Found by tests/fuzz/fuzz_csv.cpp (minimised input "1,2147483647"): the
// label was accepted and num_classes = label + 1 overflowed an int (UBSan).
TEST(DataCsvErrors, LabelInt32MaxIsRefused) {
  expect_data_error([&] { parse_csv("1,2147483647", "m.csv"); },
                    {"m.csv: line 1, column 2: label '2147483647' is not a non-negative integer below 2^31 - 1"});
  EXPECT_EQ(parse_csv("1,2147483646\n", "m.csv").num_classes, std::numeric_limits<int32_t>::max());
}

TEST(DataCsvErrors, NonFiniteEmptyAndNarrow) {
  expect_data_error([&] { parse_csv("1,2,0\n3,nan,1\n", "f.csv"); }, {"f.csv", "line 2, column 2", "non-finite"});
  expect_data_error([&] { parse_csv("1e39,2,0\n", "f.csv"); }, {"f.csv", "line 1, column 1", "non-finite"});
  expect_data_error([&] { parse_csv("", "e.csv"); }, {"e.csv", "empty"});
  expect_data_error([&] { parse_csv("\n\n", "e.csv"); }, {"e.csv", "empty"});
  expect_data_error([&] { parse_csv("a,b,y\n", "h.csv"); }, {"h.csv", "no data rows"});
  expect_data_error([&] { parse_csv("1\n2\n", "w.csv"); }, {"w.csv", "at least 2 fields"});
}

// ---- synthetic --------------------------------------------------------------------

TEST(DataSynthetic, ShapesAndDeterminism) {
  const Dataset a = make_synthetic_dataset(42, 100);
  EXPECT_EQ(a.count, 100u);
  EXPECT_EQ(a.features, 10u);
  EXPECT_EQ(a.target_dim, 10u);
  EXPECT_EQ(a.x.size(), 1000u);
  EXPECT_EQ(a.targets.size(), 1000u);
  EXPECT_FALSE(a.is_classification());
  EXPECT_NO_THROW(validate_dataset(a, a.source));
  const Dataset again = make_synthetic_dataset(42, 100);
  EXPECT_EQ(std::memcmp(a.x.data(), again.x.data(), 4 * a.x.size()), 0);
  EXPECT_EQ(std::memcmp(a.targets.data(), again.targets.data(), 4 * a.targets.size()), 0);
  EXPECT_NE(make_synthetic_dataset(43, 100).x, a.x);
  // Sample i does not depend on how many samples were asked for.
  const Dataset prefix = make_synthetic_dataset(42, 7);
  EXPECT_EQ(prefix.x, std::vector<float>(a.x.begin(), a.x.begin() + 70));
  EXPECT_EQ(prefix.targets, std::vector<float>(a.targets.begin(), a.targets.begin() + 70));
}

TEST(DataSynthetic, GoldenValuesPinTheGenerator) {
  // Bit patterns from the reference build; a platform or library change
  // that alters them breaks cross-machine reproducibility of runs.
  const Dataset d = make_synthetic_dataset(1234, 2, 3, 2, 0.01f, 0);
  const SyntheticProblem p = make_synthetic_problem(1234, 3, 2);
  auto bits = [](float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
  };
  const std::vector<uint32_t> want_x = {0x3fddcf4f, 0x3fac06f7, 0x3efe55d3, 0x3f7de84c, 0xbfe4e60d, 0x3f8cb280};
  const std::vector<uint32_t> want_w = {0x3ef87f96, 0x3f54bdf2, 0x3e937bf2, 0x3ead6f6f, 0xbc23c55e, 0xbe9c603a};
  const std::vector<uint32_t> want_y = {0x3f68f25a, 0xbf84abb8, 0xbff39e7e, 0xbfb71e13};
  ASSERT_EQ(d.x.size(), want_x.size());
  ASSERT_EQ(p.weight.size(), want_w.size());
  ASSERT_EQ(d.targets.size(), want_y.size());
  for (size_t i = 0; i < want_x.size(); ++i) EXPECT_EQ(bits(d.x[i]), want_x[i]) << "x " << i << " = " << d.x[i];
  for (size_t i = 0; i < want_w.size(); ++i) EXPECT_EQ(bits(p.weight[i]), want_w[i]) << "w " << i << " = " << p.weight[i];
  for (size_t i = 0; i < want_y.size(); ++i) EXPECT_EQ(bits(d.targets[i]), want_y[i]) << "y " << i << " = " << d.targets[i];
}

TEST(DataSynthetic, TrainAndTestShareTheProblemNotTheSamples) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const Dataset train = make_synthetic_dataset(seed, 500, 10, 10, 0.01f, 0);
  const Dataset test = make_synthetic_dataset(seed, 500, 10, 10, 0.01f, 1);
  EXPECT_NE(train.x, test.x);
  const SyntheticProblem problem = make_synthetic_problem(seed, 10, 10);
  // Residual y - (A x + b) is the noise: std 0.01, so 6 sigma bounds it.
  for (const Dataset* data : {&train, &test}) {
    double max_residual = 0;
    for (size_t i = 0; i < data->count; ++i) {
      for (size_t o = 0; o < 10; ++o) {
        double y = problem.bias[o];
        for (size_t k = 0; k < 10; ++k) y += double{problem.weight[o * 10 + k]} * data->x[i * 10 + k];
        max_residual = std::max(max_residual, std::fabs(data->targets[i * 10 + o] - y));
      }
    }
    EXPECT_LT(max_residual, 0.06);
    EXPECT_GT(max_residual, 0.01);  // the noise is there
  }
  // noise 0: y is A x + b up to the final FP32 rounding.
  const Dataset exact = make_synthetic_dataset(seed, 50, 10, 10, 0.0f, 2);
  for (size_t i = 0; i < 50; ++i) {
    double y = problem.bias[0];
    for (size_t k = 0; k < 10; ++k) y += double{problem.weight[k]} * exact.x[i * 10 + k];
    EXPECT_EQ(exact.targets[i * 10], static_cast<float>(y));
  }
}

TEST(DataSynthetic, FeaturesAreStandardNormal) {
  const Dataset data = make_synthetic_dataset(test::test_seed(), 20000, 10, 1);
  double sum = 0, sum_sq = 0, fourth = 0;
  for (float v : data.x) {
    sum += v;
    sum_sq += double{v} * v;
    fourth += double{v} * v * v * v;
  }
  const double n = static_cast<double>(data.x.size());
  // n = 2e5: the mean's standard error is 0.0022, the variance's 0.0032;
  // bounds at ~9 standard errors never fail by chance.
  EXPECT_NEAR(sum / n, 0.0, 0.02);
  EXPECT_NEAR(sum_sq / n, 1.0, 0.03);
  EXPECT_NEAR(fourth / n, 3.0, 0.15);  // kurtosis of a normal: tails are right
}

TEST(DataSynthetic, BadArguments) {
  expect_data_error([] { make_synthetic_dataset(1, 10, 0, 10); }, {"synthetic", "in_dim"});
  expect_data_error([] { make_synthetic_dataset(1, 10, 10, 10, -1.0f); }, {"synthetic", "noise"});
  expect_data_error([] { validate_dataset(make_synthetic_dataset(1, 0), "synthetic"); }, {"synthetic", "empty"});
}

// ---- validate_dataset ---------------------------------------------------------------

Dataset small_classification() {
  Dataset d;
  d.count = 2;
  d.features = 3;
  d.x = {0, 1, 2, 3, 4, 5};
  d.labels = {1, 0};
  d.num_classes = 2;
  return d;
}

TEST(DataValidate, AcceptsConsistentAndRejectsInconsistent) {
  EXPECT_NO_THROW(validate_dataset(small_classification(), "ok"));
  Dataset nan = small_classification();
  nan.x[5] = std::numeric_limits<float>::quiet_NaN();
  expect_data_error([&] { validate_dataset(nan, "v.bin"); }, {"v.bin: non-finite value (nan) in sample 1, feature 2"});
  Dataset inf = small_classification();
  inf.x[0] = std::numeric_limits<float>::infinity();
  expect_data_error([&] { validate_dataset(inf, "v.bin"); }, {"v.bin: non-finite value (inf) in sample 0, feature 0"});
  Dataset shape = small_classification();
  shape.x.pop_back();
  expect_data_error([&] { validate_dataset(shape, "v.bin"); }, {"v.bin", "mismatch"});
  Dataset count = small_classification();
  count.labels.push_back(0);
  expect_data_error([&] { validate_dataset(count, "v.bin"); }, {"v.bin", "count mismatch"});
  Dataset negative = small_classification();
  negative.labels[1] = -1;
  expect_data_error([&] { validate_dataset(negative, "v.bin"); }, {"v.bin", "bad label -1 in sample 1"});
  Dataset classes = small_classification();
  classes.num_classes = 1;
  expect_data_error([&] { validate_dataset(classes, "v.bin"); }, {"v.bin", "num_classes"});
  Dataset both = small_classification();
  both.target_dim = 1;
  both.targets = {0, 1};
  expect_data_error([&] { validate_dataset(both, "v.bin"); }, {"v.bin", "both"});
  Dataset neither = small_classification();
  neither.labels.clear();
  expect_data_error([&] { validate_dataset(neither, "v.bin"); }, {"v.bin", "neither"});
}

}  // namespace
}  // namespace ddp
