// test_atomic_file_mid_write.cpp: write_file_atomic's mid-write hook (the
// test hook behind DDP_TEST_CHECKPOINT_WRITE): it runs once, with half the
// bytes in the temporary file and the final name untouched; returning 0
// the file is written whole and the same as without a hook, returning an
// errno value the write fails there as write(2) would: the old file stays
// and the temporary file is removed.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "support/temp_dir.h"
#include "trainer/io/atomic_file.h"

namespace ddp {
namespace {
namespace fs = std::filesystem;

std::vector<uint8_t> bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

std::vector<uint8_t> counting_bytes(size_t count) {
  std::vector<uint8_t> bytes(count);
  for (size_t i = 0; i < count; ++i) bytes[i] = static_cast<uint8_t>(i * 7 + 1);
  return bytes;
}

TEST(AtomicFileMidWrite, RunsOnceWithHalfTheBytesInTheTemporaryFile) {
  const test::TempDir dir("atomic-mid-write");
  const std::string file = dir.path() + "/f.bin";
  const std::string temp = file + kTempFileMarker + std::to_string(::getpid());
  write_file_atomic(file, {1, 2, 3}, "test file");
  const std::vector<uint8_t> bytes = counting_bytes(100001);
  int calls = 0;
  write_file_atomic(file, bytes, "test file", [&] {
    ++calls;
    EXPECT_EQ(fs::file_size(temp), bytes.size() / 2);
    EXPECT_EQ(bytes_of(file), (std::vector<uint8_t>{1, 2, 3})) << "the final name changed before the rename";
    return 0;
  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(bytes_of(file), bytes);
  EXPECT_FALSE(fs::exists(temp));
}

TEST(AtomicFileMidWrite, AnErrnoFailsTheWriteThereAndKeepsTheOldFile) {
  const test::TempDir dir("atomic-mid-write");
  const std::string file = dir.path() + "/f.bin";
  const std::string temp = file + kTempFileMarker + std::to_string(::getpid());
  write_file_atomic(file, {1, 2, 3}, "test file");
  std::string message;
  try {
    write_file_atomic(file, counting_bytes(1000), "test file", [] { return EIO; });
  } catch (const FileWriteError& e) {
    message = e.what();
  }
  EXPECT_EQ(message, "cannot write test file " + file + ": writing " + temp + ": " + std::strerror(EIO));
  EXPECT_EQ(bytes_of(file), (std::vector<uint8_t>{1, 2, 3}));
  EXPECT_FALSE(fs::exists(temp));
}

}  // namespace
}  // namespace ddp
