// test_data_idx.cpp: the IDX reader (MNIST's format, plain and gzipped,
// concatenated gzip members) and Fashion-MNIST's file pairs; every damaged
// file raises DataError with one line naming the file and the problem.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/data_file_support.h"
#include "trainer/io/data_file.h"
#include "trainer/data/dataset.h"
#include "trainer/data/idx_reader.h"

namespace ddp {
namespace {

using namespace test;  // data_file_support.h: file builders, expect_data_error

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
  expect_data_error(
      [&] {
        parse_idx(idx_bytes({0xffffffff, 0xffffffff, 0xffffffff}, {1, 2}), "h.idx");
      },
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
  expect_data_error(
      [&] {
        parse_idx(idx_bytes({1}, {0, 0, 0, 0}, 0x0D), "f.idx");
      },
      {"f.idx", "dtype", "0x0d", "float32"});
}

TEST(DataIdxErrors, ZeroNdim) {
  expect_data_error([&] { parse_idx({0, 0, 8, 0}, "z.idx"); }, {"z.idx", "magic", "ndim"});
}

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

}  // namespace
}  // namespace ddp
