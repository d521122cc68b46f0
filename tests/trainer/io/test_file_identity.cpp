// test_file_identity.cpp: file_identity tells copies of a file apart from
// other files (trainer/io/file_identity.h), whole below the sampling size and
// by sampled blocks above it, and never throws on a path it cannot read.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "support/temp_dir.h"
#include "support/test_support.h"
#include "trainer/io/file_identity.h"

namespace ddp {
namespace {

void write_bytes(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::vector<char> random_bytes(size_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<char> out(count);
  for (char& b : out) b = static_cast<char>(rng());
  return out;
}

TEST(FileIdentity, CopiesAgreeAndAnyChangedByteDiffers) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const test::TempDir dir("file-identity");
  const std::vector<char> bytes = random_bytes(100000, seed);
  write_bytes(dir.path() + "/a", bytes);
  write_bytes(dir.path() + "/copy", bytes);
  std::vector<char> changed = bytes;
  changed[std::mt19937_64(seed + 1)() % changed.size()] ^= 1;
  write_bytes(dir.path() + "/changed", changed);
  write_bytes(dir.path() + "/shorter", std::vector<char>(bytes.begin(), bytes.end() - 1));

  const std::string a = file_identity(dir.path() + "/a");
  EXPECT_EQ(a.rfind("file, 100000 bytes, crc32 ", 0), 0u) << a;
  EXPECT_EQ(file_identity(dir.path() + "/copy"), a);
  EXPECT_NE(file_identity(dir.path() + "/changed"), a);
  EXPECT_NE(file_identity(dir.path() + "/shorter"), a);
}

TEST(FileIdentity, LargeFilesAreSampledAndStillToldApart) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const test::TempDir dir("file-identity-large");
  std::vector<char> bytes = random_bytes(kIdentityWholeFileBytes + 12345, seed);
  write_bytes(dir.path() + "/big", bytes);
  const std::string big = file_identity(dir.path() + "/big");
  EXPECT_NE(big.find(", sampled"), std::string::npos) << big;
  // The last byte lies in the last block, which is always read.
  bytes.back() ^= 1;
  write_bytes(dir.path() + "/big2", bytes);
  EXPECT_NE(file_identity(dir.path() + "/big2"), big);
  bytes.back() ^= 1;
  write_bytes(dir.path() + "/big3", bytes);
  EXPECT_EQ(file_identity(dir.path() + "/big3"), big);
}

TEST(FileIdentity, DirectoriesByTheirFilesAndListingsByNamesAndSizes) {
  const test::TempDir one("file-identity-dir1"), two("file-identity-dir2");
  for (const std::string& d : {one.path(), two.path()}) {
    write_bytes(d + "/x.gz", {'a', 'b'});
    write_bytes(d + "/y.gz", {'c'});
  }
  EXPECT_EQ(file_identity(one.path()), file_identity(two.path()));
  EXPECT_EQ(listing_identity(one.path()), listing_identity(two.path()));
  write_bytes(two.path() + "/y.gz", {'d'});  // same size, other byte
  EXPECT_NE(file_identity(one.path()), file_identity(two.path()));
  EXPECT_EQ(listing_identity(one.path()), listing_identity(two.path())) << "a listing reads no content";
  write_bytes(two.path() + "/z.gz", {'e'});
  EXPECT_NE(listing_identity(one.path()), listing_identity(two.path()));
}

TEST(FileIdentity, AMissingOrUnreadablePathIsSaidNotThrown) {
  const test::TempDir dir("file-identity-missing");
  EXPECT_EQ(file_identity(dir.path() + "/nothing"), "missing");
  EXPECT_EQ(listing_identity(dir.path() + "/nothing"), "missing");
  EXPECT_EQ(file_identity("/dev/null"), "not a regular file");
}

}  // namespace
}  // namespace ddp
