// test_checkpoint_atomic_write.cpp: write_checkpoint_atomic leaves the old
// file or the new one, never a partial one: a failed write (a file-size
// limit, as a full disk) keeps the old file and removes its temporary, a
// missing directory is named, and a reader racing the writer sees only
// complete files.
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <thread>

#include "checkpoint_test_support.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/checkpoint_dir.h"
#include "support/file_size_limit.h"

namespace ddp {
namespace {

namespace fs = std::filesystem;
using namespace test;  // checkpoint_test_support.h: states, byte surgery, the fixture

// ---- atomic write -----------------------------------------------------------------

TEST_F(CheckpointAtomicWrite, LeavesOnlyTheFileOnSuccess) {
  const std::string name = checkpoint_file_name(10);
  write_checkpoint_atomic(path(name), small_state(10));
  write_checkpoint_atomic(path(name), small_state(11));  // replaces
  EXPECT_EQ(file_names_in(dir_), std::set<std::string>{name});
  EXPECT_EQ(read_checkpoint(path(name)).step, 11);
}

// A write that fails half-way (here: a file-size limit, as a full disk would)
// leaves the previous checkpoint untouched and no temporary file behind.
TEST_F(CheckpointAtomicWrite, FailedWriteKeepsOldFileAndRemovesTemp) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  const std::string file = path(checkpoint_file_name(1));
  const TrainState old_state = small_state(1);
  write_checkpoint_atomic(file, old_state);
  // Someone else's leftover temp file must survive too.
  const std::string other_temp = file + ".tmp.999999999";
  write_bytes(other_temp, {1, 2, 3});

  TrainState big = random_state(rng_, 200);
  reshape_model(big, {400, 500}, 1.0f);  // 200k parameters, > 1.6 MB: far beyond the limit
  std::string message;
  {
    test::FileSizeLimit limit(64 * 1024);
    try {
      write_checkpoint_atomic(file, big);
    } catch (const Error& e) {
      message = e.what();
    }
  }
  ASSERT_FALSE(message.empty()) << "write under a 64 KiB file-size limit did not fail";
  EXPECT_TRUE(contains(message, file)) << message;
  EXPECT_TRUE(contains(message, std::strerror(EFBIG))) << message;
  EXPECT_EQ(file_names_in(dir_),
            (std::set<std::string>{checkpoint_file_name(1), fs::path(other_temp).filename().string()}));
  expect_same_state(old_state, read_checkpoint(file));
}

TEST_F(CheckpointAtomicWrite, MissingDirectoryIsNamed) {
  const std::string file = dir_ + "/no/such/dir/" + checkpoint_file_name(1);
  try {
    write_checkpoint_atomic(file, small_state(1));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), file)) << e.what();
    EXPECT_TRUE(contains(e.what(), std::strerror(ENOENT))) << e.what();
  }
  EXPECT_TRUE(file_names_in(dir_).empty());
}

// A reader racing the writer sees the old or the new checkpoint, never a
// partial one: the rename is the only moment the name changes content.
TEST_F(CheckpointAtomicWrite, ConcurrentReaderSeesOnlyCompleteFiles) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  const std::string file = path(checkpoint_file_name(0));
  TrainState a = random_state(rng_, 100);
  TrainState b = a;
  a.step = 1;
  b.step = 2;
  write_checkpoint_atomic(file, a);
  std::atomic<bool> done{false};
  std::atomic<int> bad_reads{0};
  std::atomic<int> reads{0};
  std::thread reader([&] {
    while (!done.load()) {
      try {
        const TrainState got = read_checkpoint(file);
        if (got.step != 1 && got.step != 2) ++bad_reads;
      } catch (const std::exception&) {
        ++bad_reads;
      }
      ++reads;
    }
  });
  for (int i = 0; i < 40; ++i) write_checkpoint_atomic(file, i % 2 ? a : b);
  done = true;
  reader.join();
  EXPECT_EQ(bad_reads.load(), 0) << "of " << reads.load() << " reads";
}

}  // namespace
}  // namespace ddp
