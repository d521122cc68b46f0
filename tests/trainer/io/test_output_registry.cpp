// test_output_registry.cpp: the record of what ddp_train wrote
// (output_registry.h). A file written through write_file_atomic is known
// as ours and may be replaced; a user's file (same name, same kind of
// content) is refused until --overwrite; a file of ours edited or replaced
// since is no longer ours; torn lines are skipped; compaction keeps live
// entries only; a registry that cannot be written is a note, not a failure.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "kernels/error.h"
#include "support/temp_dir.h"
#include "support/test_support.h"
#include "trainer/io/atomic_file.h"
#include "trainer/io/json_writer.h"
#include "trainer/io/output_registry.h"

namespace ddp {
namespace {
namespace fs = std::filesystem;

// XDG_STATE_HOME pointed at a fresh directory for one test, then restored.
class RegistryHome {
 public:
  explicit RegistryHome(const std::string& dir) {
    const char* old = std::getenv("XDG_STATE_HOME");
    had_old_ = old != nullptr;
    if (had_old_) old_ = old;
    ::setenv("XDG_STATE_HOME", dir.c_str(), 1);
  }
  ~RegistryHome() {
    if (had_old_) ::setenv("XDG_STATE_HOME", old_.c_str(), 1);
    else ::unsetenv("XDG_STATE_HOME");
  }

 private:
  bool had_old_ = false;
  std::string old_;
};

std::vector<uint8_t> random_bytes(size_t count) {
  std::mt19937_64 rng(test::test_seed());
  std::vector<uint8_t> bytes(count);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  return bytes;
}

void write_plain(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

std::string message_of(const std::string& path, bool overwrite) {
  try {
    check_replaceable(path, "--predictions", overwrite);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(OutputRegistry, PathFollowsXdgStateHomeThenHome) {
  const test::TempDir dir("registry-path");
  {
    const RegistryHome home(dir.path());
    EXPECT_EQ(output_registry_path(), dir.path() + "/ddp_train/outputs.jsonl");
  }
  const RegistryHome relative("relative/state");  // not absolute: ignored, as the XDG spec says
  const char* h = std::getenv("HOME");
  if (h != nullptr && h[0] != '\0') {
    EXPECT_EQ(output_registry_path(), std::string(h) + "/.local/state/ddp_train/outputs.jsonl");
  }
}

TEST(OutputRegistry, AFileWrittenAtomicallyIsOursAndReplaceableSayingSo) {
  const test::TempDir dir("registry-ours");
  const RegistryHome home(dir.path() + "/state");
  const std::string file = dir.path() + "/out.npy";
  write_file_atomic(file, random_bytes(300), "npy file");
  const std::optional<OutputRecord> record = owner_of(file);
  ASSERT_TRUE(record.has_value());
  EXPECT_NE(record->writer.find("(npy file)"), std::string::npos) << record->writer;
  const std::string note = check_replaceable(file, "--predictions", false);
  EXPECT_NE(note.find("--predictions " + file + ": replacing it (written by"), std::string::npos) << note;
}

TEST(OutputRegistry, AUsersFileIsRefusedUntilOverwriteAndLeftAsItWas) {
  const test::TempDir dir("registry-users");
  const RegistryHome home(dir.path() + "/state");
  // One of ours elsewhere, so the registry exists and is not empty.
  write_file_atomic(dir.path() + "/ours.bin", random_bytes(10), "npy file");
  const std::string file = dir.path() + "/user.npy";
  const std::vector<uint8_t> bytes = random_bytes(200);
  write_plain(file, bytes);
  EXPECT_FALSE(owner_of(file).has_value());
  const std::string message = message_of(file, false);
  EXPECT_NE(message.find("--predictions " + file + ": exists and is not a file ddp_train wrote"), std::string::npos)
      << message;
  EXPECT_NE(message.find(output_registry_path()), std::string::npos) << message;
  EXPECT_NE(message.find("--overwrite"), std::string::npos) << message;
  EXPECT_EQ(test::read_text(file), std::string(bytes.begin(), bytes.end()));
  EXPECT_NE(check_replaceable(file, "--predictions", true).find("replacing it (--overwrite)"), std::string::npos);
}

TEST(OutputRegistry, NothingThereOrAnEmptyFileNeedsNoPermission) {
  const test::TempDir dir("registry-empty");
  const RegistryHome home(dir.path() + "/state");
  EXPECT_EQ(check_replaceable(dir.path() + "/new.npy", "--predictions", false), "");
  write_plain(dir.path() + "/empty", {});
  EXPECT_EQ(check_replaceable(dir.path() + "/empty", "--predictions", false), "");
}

TEST(OutputRegistry, OursEditedOrReplacedSinceIsNoLongerOurs) {
  const test::TempDir dir("registry-edited");
  const RegistryHome home(dir.path() + "/state");
  const std::string appended = dir.path() + "/appended.npy";
  write_file_atomic(appended, random_bytes(100), "npy file");
  ASSERT_TRUE(owner_of(appended).has_value());
  std::ofstream(appended, std::ios::app) << 'x';
  EXPECT_FALSE(owner_of(appended).has_value());
  EXPECT_NE(message_of(appended, false).find("not a file ddp_train wrote"), std::string::npos);

  // Same size, same name, a new inode: a copy the user put there.
  const std::string replaced = dir.path() + "/replaced.npy";
  write_file_atomic(replaced, random_bytes(100), "npy file");
  ASSERT_TRUE(owner_of(replaced).has_value());
  const std::string copy = dir.path() + "/copy";
  write_plain(copy, random_bytes(100));
  fs::rename(copy, replaced);
  EXPECT_FALSE(owner_of(replaced).has_value());
}

// --metrics is recorded at its first line and when closed: a run killed in
// between left more lines than recorded, and the file is still its own,
// also after a compaction of the registry; shorter than recorded, it is not.
TEST(OutputRegistry, AnAppendOnlyOutputStaysOursWhileItOnlyGrows) {
  const test::TempDir dir("registry-appended");
  const RegistryHome home(dir.path() + "/state");
  const std::string file = dir.path() + "/m.jsonl";
  {
    MetricsFile metrics(file);
    metrics.write(JsonRecord().add("event", "step"));
    metrics.write(JsonRecord().add("event", "step"));  // grown since the first line's record
    EXPECT_TRUE(owner_of(file).has_value());
  }
  EXPECT_TRUE(owner_of(file).has_value());
  std::ofstream(file, std::ios::app) << "{\"event\":\"step\"}\n";  // as a killed run leaves it
  EXPECT_TRUE(owner_of(file).has_value());
  {
    std::ofstream out(output_registry_path(), std::ios::app);
    const std::string dead = "{\"ino\": 2, \"size\": 3, \"mtime_ns\": 4, \"path\": \"/gone\"}\n";
    for (int64_t written = 0; written <= kRegistryCompactBytes; written += static_cast<int64_t>(dead.size())) out << dead;
  }
  write_file_atomic(dir.path() + "/other.bin", random_bytes(8), "npy file");  // compacts
  EXPECT_LT(fs::file_size(output_registry_path()), 4096u);
  EXPECT_TRUE(owner_of(file).has_value()) << "the compaction dropped a grown --metrics file's record";
  fs::resize_file(file, 5);  // shorter than recorded: not what ddp_train left
  EXPECT_FALSE(owner_of(file).has_value());
  EXPECT_NE(message_of(file, false).find("not a file ddp_train wrote"), std::string::npos);
}

// A record appended after a torn last line (a write cut short) is found.
TEST(OutputRegistry, ARecordAfterATornLastLineIsKept) {
  const test::TempDir dir("registry-torn-last");
  const RegistryHome home(dir.path() + "/state");
  write_file_atomic(dir.path() + "/first.bin", random_bytes(8), "npy file");
  std::ofstream(output_registry_path(), std::ios::app) << "{\"ino\": 12, \"si";  // no newline
  const std::string file = dir.path() + "/second.bin";
  write_file_atomic(file, random_bytes(8), "npy file");
  EXPECT_TRUE(owner_of(file).has_value());
}

TEST(OutputRegistry, TornAndForeignLinesAreSkipped) {
  const test::TempDir dir("registry-torn");
  const RegistryHome home(dir.path() + "/state");
  const std::string file = dir.path() + "/out.bin";
  write_file_atomic(file, random_bytes(64), "npy file");
  {
    std::ofstream out(output_registry_path(), std::ios::app);
    out << "{\"dev\": 1, \"ino\": \n" << "[1, 2, 3]\n" << "{\"dev\": \"x\"}\n" << "\xff\xfe garbage\n";
  }
  EXPECT_TRUE(owner_of(file).has_value());
  // A record appended after the torn lines is found too.
  const std::string second = dir.path() + "/second.bin";
  write_file_atomic(second, random_bytes(64), "npy file");
  EXPECT_TRUE(owner_of(second).has_value());
}

TEST(OutputRegistry, CompactionKeepsOnlyLiveEntriesOnePerFile) {
  const test::TempDir dir("registry-compact");
  const RegistryHome home(dir.path() + "/state");
  const std::string live = dir.path() + "/live.bin";
  write_file_atomic(live, random_bytes(32), "npy file");
  // Past the threshold with records of files since deleted.
  const std::string gone = dir.path() + "/gone.bin";
  {
    std::ofstream out(output_registry_path(), std::ios::app);
    const std::string line = "{\"dev\": 1, \"ino\": 2, \"size\": 3, \"mtime_ns\": 4, \"path\": \"" + gone +
                             "\", \"writer\": \"old\", \"time\": \"then\"}\n";
    for (int64_t written = 0; written <= kRegistryCompactBytes; written += static_cast<int64_t>(line.size())) out << line;
  }
  write_file_atomic(live, random_bytes(48), "npy file");  // a second record of the same path, after compaction
  EXPECT_LT(fs::file_size(output_registry_path()), 4096u);
  EXPECT_EQ(test::read_text(output_registry_path()).find("gone.bin"), std::string::npos);
  EXPECT_TRUE(owner_of(live).has_value());
}

TEST(OutputRegistry, ARegistryThatCannotBeWrittenIsANoteNotAFailure) {
  const test::TempDir dir("registry-unwritable");
  // A file where the state directory would be: no directory can be made
  // there, for root either.
  write_plain(dir.path() + "/state", {1});
  const RegistryHome home(dir.path() + "/state");
  const std::string file = dir.path() + "/out.bin";
  testing::internal::CaptureStderr();
  write_file_atomic(file, random_bytes(16), "npy file");
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(fs::exists(file));
  EXPECT_NE(err.find("note: cannot record " + file), std::string::npos) << err;
  EXPECT_FALSE(owner_of(file).has_value());
}

}  // namespace
}  // namespace ddp
