// data_file_support.h: the data-reader suites' inputs, built in memory
// by the tests (IDX, .npy and CSV bytes, gzipped with zlib where that
// matters) and written into a per-test temporary directory, and the check
// that a bad input raises DataError with one line naming the file and the
// problem.
#pragma once

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "support/test_support.h"
#include "trainer/io/data_error.h"

namespace ddp::test {

using Bytes = std::vector<uint8_t>;

// One fresh directory per test (tests run in parallel under ctest), removed
// when the process exits.
inline std::string temp_file(const std::string& name) {
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

inline void write_bytes(const std::string& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

inline std::string write_temp(const std::string& name, const Bytes& bytes) {
  const std::string path = temp_file(name);
  write_bytes(path, bytes);
  return path;
}

inline Bytes text_bytes(const std::string& text) { return Bytes(text.begin(), text.end()); }

inline Bytes gzip(const Bytes& raw) {
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
inline Bytes idx_bytes(const std::vector<uint32_t>& dims, const Bytes& data, uint8_t dtype = 0x08) {
  Bytes out = {0, 0, dtype, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(d >> shift));
  }
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

// .npy with a hand-written header dict, padded like numpy's.
inline Bytes npy_bytes(const std::string& dict, const Bytes& data, int major = 1) {
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

inline std::string npy_dict(const std::string& descr, const std::string& shape, const char* order = "False") {
  return "{'descr': '" + descr + "', 'fortran_order': " + order + ", 'shape': " + shape + ", }";
}

template <typename T>
inline Bytes le_bytes(const std::vector<T>& values) {  // the test machine is little-endian (x86-64, arm64)
  Bytes out(values.size() * sizeof(T));
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

// Runs `load`, which must throw DataError whose one-line message contains
// every needle.
inline void expect_data_error(const std::function<void()>& load, std::initializer_list<std::string> needles) {
  try {
    load();
    ADD_FAILURE() << "no DataError thrown";
  } catch (const DataError& e) {
    const std::string message = e.what();
    for (const std::string& needle : needles)
      EXPECT_NE(message.find(needle), std::string::npos) << "missing '" << needle << "' in: " << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << "not one line: " << message;
  }
}

}  // namespace ddp::test
