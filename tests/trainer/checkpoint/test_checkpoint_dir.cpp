// test_checkpoint_dir.cpp: the checkpoint directory: file names, the newest
// valid checkpoint and what the scan skipped (and why), and pruning that
// deletes only this run's older checkpoints, decided on the header alone.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "checkpoint_test_support.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/checkpoint_dir.h"

namespace ddp {
namespace {

namespace fs = std::filesystem;
using namespace test;  // checkpoint_test_support.h: states, byte surgery, the fixture

// ---- directory --------------------------------------------------------------------

TEST(CheckpointNames, StepIsZeroPaddedToTwelveDigits) {
  EXPECT_EQ(checkpoint_file_name(0), "ckpt-step000000000000.safetensors");
  EXPECT_EQ(checkpoint_file_name(1234), "ckpt-step000000001234.safetensors");
  EXPECT_EQ(checkpoint_file_name(1234567890123), "ckpt-step1234567890123.safetensors");
  EXPECT_THROW(checkpoint_file_name(-1), Error);
}

TEST_F(CheckpointDir, PicksNewestValidAndReportsWhatItSkipped) {
  const std::string older = path(checkpoint_file_name(100));
  const std::string newest = path(checkpoint_file_name(200));
  const std::string leftover = path(checkpoint_file_name(300)) + ".tmp.12345";
  write_checkpoint_atomic(older, small_state(100));
  write_checkpoint_atomic(newest, small_state(200));
  std::vector<uint8_t> damaged = serialize_checkpoint(small_state(200));
  damaged[damaged.size() - 5] ^= 0x10;  // in a tensor's bytes
  write_bytes(newest, damaged);
  write_bytes(leftover, std::vector<uint8_t>(20, 0));
  write_bytes(path("metrics.jsonl"), {'{', '}', '\n'});         // not a checkpoint
  write_bytes(path("ckpt-step5.ddpckpt"), {'x'});               // not our naming
  write_bytes(path(checkpoint_file_name(50) + ".bak"), {'x'});  // not our naming

  const CheckpointScan scan = find_newest_valid_checkpoint(dir_);
  EXPECT_EQ(scan.newest_valid, older);
  EXPECT_EQ(scan.candidates, 2u);
  ASSERT_EQ(scan.skipped.size(), 2u);
  EXPECT_EQ(scan.skipped[0].first, leftover);
  EXPECT_TRUE(contains(scan.skipped[0].second, "incomplete write")) << scan.skipped[0].second;
  EXPECT_EQ(scan.skipped[1].first, newest);
  EXPECT_EQ(scan.skipped[1].second, "checksum mismatch (file corrupt)");
  EXPECT_TRUE(fs::exists(leftover)) << "the scan must not delete anything";
  EXPECT_TRUE(fs::exists(newest));
  EXPECT_EQ(read_checkpoint(scan.newest_valid).step, 100);
}

TEST_F(CheckpointDir, EmptyOrMissingDirectoryHasNoCheckpoint) {
  for (const std::string& dir : {dir_, dir_ + "/missing"}) {
    const CheckpointScan scan = find_newest_valid_checkpoint(dir);
    EXPECT_TRUE(scan.newest_valid.empty());
    EXPECT_EQ(scan.candidates, 0u);
    EXPECT_TRUE(scan.skipped.empty());
  }
}

TEST_F(CheckpointDir, NoValidCheckpointListsEveryCandidate) {
  for (int64_t step : {1, 2, 3}) write_bytes(path(checkpoint_file_name(step)), {'D', 'D', 'P'});
  const CheckpointScan scan = find_newest_valid_checkpoint(dir_);
  EXPECT_TRUE(scan.newest_valid.empty());
  EXPECT_EQ(scan.candidates, 3u);
  ASSERT_EQ(scan.skipped.size(), 3u);
  EXPECT_EQ(scan.skipped[0].first, path(checkpoint_file_name(3)));  // newest first
  EXPECT_TRUE(contains(scan.skipped[0].second, "truncated"));
}

// A checksum that holds is not a valid state: the scan passes over a newer
// file whose contents are out of range and names the field.
TEST_F(CheckpointDir, ScanPassesOverContentsOutOfRange) {
  write_checkpoint_atomic(path(checkpoint_file_name(4)), small_state(4));
  TrainState bad = small_state(8);
  bad.scaler.scale = std::nan("");
  write_checkpoint_atomic(path(checkpoint_file_name(8)), bad);
  const CheckpointScan scan = find_newest_valid_checkpoint(dir_);
  EXPECT_EQ(scan.newest_valid, path(checkpoint_file_name(4)));
  ASSERT_EQ(scan.skipped.size(), 1u);
  EXPECT_TRUE(contains(scan.skipped[0].second, "corrupt contents")) << scan.skipped[0].second;
  EXPECT_TRUE(contains(scan.skipped[0].second, "scale")) << scan.skipped[0].second;
}

// A resume from an earlier checkpoint (step 6 of 6 and 8) writes 7: the 8
// of the branch it left is above the one just written, so it is neither
// counted nor deleted, and the 6 it resumed from is kept with keep 2.
TEST_F(CheckpointDir, PruneLeavesTheBranchAResumeLeftAlone) {
  const uint64_t ours = small_state(0).run_id;
  const std::vector<int64_t> widths = small_state(0).model_dims;
  for (int64_t step : {6, 8, 7}) write_checkpoint_atomic(path(checkpoint_file_name(step)), small_state(step));
  EXPECT_TRUE(prune_checkpoints(dir_, 2, ours, widths, path(checkpoint_file_name(7))).empty());
  EXPECT_EQ(file_names_in(dir_).size(), 3u);
  const std::vector<std::string> removed = prune_checkpoints(dir_, 1, ours, widths, path(checkpoint_file_name(7)));
  EXPECT_EQ(removed, std::vector<std::string>{path(checkpoint_file_name(6))});
  EXPECT_EQ(file_names_in(dir_), (std::set<std::string>{checkpoint_file_name(7), checkpoint_file_name(8)}));
}

TEST_F(CheckpointDir, PruneKeepsTheNewestOfThisRunOnly) {
  const uint64_t ours = 0x5eed0001;
  const std::vector<int64_t> steps = {5, 1000, 20, 7, 100};
  for (int64_t step : steps) write_checkpoint_atomic(path(checkpoint_file_name(step)), small_state(step));
  // Another run's checkpoints, another model's, a legacy one (no lineage) and
  // a damaged one: none of them is this run's to delete.
  TrainState other = small_state(3);
  other.run_id = ours + 1;
  write_checkpoint_atomic(path(checkpoint_file_name(3)), other);
  TrainState other_model = small_state(2);
  reshape_model(other_model, {2, 2, 2});
  write_checkpoint_atomic(path(checkpoint_file_name(2)), other_model);
  TrainState legacy = small_state(1);
  legacy.run_id = 0;
  write_checkpoint_atomic(path(checkpoint_file_name(1)), legacy);
  write_bytes(path(checkpoint_file_name(4)), {'D', 'D', 'P', 'C'});
  const std::string leftover = checkpoint_file_name(2000) + ".tmp.1";
  write_bytes(path(leftover), {0});
  write_bytes(path("metrics.jsonl"), {'\n'});
  const size_t all = steps.size() + 6;
  const std::vector<int64_t> widths = {3, 2, 2};

  EXPECT_TRUE(prune_checkpoints(dir_, 0, ours, widths, "").empty());  // keep all
  EXPECT_EQ(file_names_in(dir_).size(), all);
  EXPECT_TRUE(prune_checkpoints(dir_, 1, 0, widths, "").empty());  // no lineage: nothing is provably ours
  EXPECT_EQ(file_names_in(dir_).size(), all);

  // The K newest of this run stay, the one just written among them.
  const std::vector<std::string> removed = prune_checkpoints(dir_, 2, ours, widths, path(checkpoint_file_name(1000)));
  EXPECT_EQ(removed.size(), 3u);
  std::set<std::string> want = file_names_in(dir_);
  EXPECT_EQ(want.count(checkpoint_file_name(1000)) + want.count(checkpoint_file_name(100)), 2u);
  EXPECT_EQ(
      want.count(checkpoint_file_name(20)) + want.count(checkpoint_file_name(7)) + want.count(checkpoint_file_name(5)),
      0u);
  for (int64_t foreign : {1, 2, 3, 4}) EXPECT_EQ(want.count(checkpoint_file_name(foreign)), 1u) << foreign;
  EXPECT_EQ(want.count(leftover) + want.count("metrics.jsonl"), 2u);

  EXPECT_TRUE(prune_checkpoints(dir_, 5, ours, widths, "").empty());  // fewer than keep: nothing to do
  EXPECT_EQ(file_names_in(dir_).size(), all - 3);
  EXPECT_TRUE(prune_checkpoints(dir_ + "/missing", 1, ours, widths, "").empty());
}

TEST_F(CheckpointDir, HeaderNamesTheLineageWithoutReadingTheWeights) {
  TrainState s = small_state(42);
  write_checkpoint_atomic(path("a"), s);
  const CheckpointHeader h = read_checkpoint_header(path("a"));
  EXPECT_EQ(h.step, 42);
  EXPECT_EQ(h.run_id, s.run_id);
  EXPECT_EQ(h.model_dims, s.model_dims);
  // The weights may be cut: the header still reads (pruning decides on it).
  std::vector<uint8_t> bytes = serialize_checkpoint(s);
  bytes.resize(bytes.size() - 20);
  write_bytes(path("b"), bytes);
  EXPECT_EQ(read_checkpoint_header(path("b")).run_id, s.run_id);
  bytes.resize(20);
  write_bytes(path("c"), bytes);
  EXPECT_TRUE(contains(checkpoint_error_of([&] { read_checkpoint_header(path("c")); }), "truncated"));
}

}  // namespace
}  // namespace ddp
