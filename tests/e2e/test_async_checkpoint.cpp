// test_async_checkpoint.cpp: --async-checkpoint as a user runs it. Its
// checkpoints hold the same tensors and metadata as the synchronous ones
// (the lineage id aside), on one rank and on two at --zero 1 and 3; a
// resume from one continues bit for bit; pruning keeps the same files; a
// SIGKILL while the background write is held half-way leaves a directory
// that resumes from the previous checkpoint and finishes; a write that
// fails is one error line and exit 1; the end of a run and a SIGTERM wait
// for the last write; the metrics say what checkpoints cost the loop; the flag
// is refused where it means nothing.
#include <gtest/gtest.h>

#include <signal.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "child_process.h"
#include "support/cli_test.h"
#include "support/test_support.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/checkpoint_dir.h"

namespace ddp {
namespace {
namespace fs = std::filesystem;
using test::Child;
using test::lines_with;

class AsyncCheckpoint : public test::CliTest {
 protected:
  AsyncCheckpoint() : CliTest("async-ckpt") {}
};

// Small and quick: 12 steps of a tiny MLP; kRun with a checkpoint every 3.
const std::string kBase = " --data synthetic --layers 10,32,10 --steps 12 --seed 3";
const std::string kRun = kBase + " --checkpoint-every 3 --log-every 1";

test::CommandResult trainer_on(int ranks, const std::string& args) {
#if defined(DDP_MPIEXEC)
  const std::string launcher = ranks > 1 ? test::mpiexec_prefix(ranks) : "";
#else
  const std::string launcher;
#endif
  return test::run_command(launcher + test::trainer_command() + " " + args + " 2>&1");
}

// A checkpoint's whole contents, tensors and metadata, with the run's
// random lineage id set aside (and with it the checksum that covers it).
std::vector<uint8_t> contents_of(const std::string& path) {
  TrainState s = read_checkpoint(path);
  s.run_id = 0;
  return serialize_checkpoint(s);
}

std::set<std::string> names_in(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

// Two checkpoint directories hold the same files with the same contents.
void expect_same_checkpoints(const std::string& sync_dir, const std::string& async_dir) {
  const std::set<std::string> names = names_in(sync_dir);
  EXPECT_EQ(names_in(async_dir), names);
  EXPECT_FALSE(names.empty());
  for (const std::string& name : names)
    EXPECT_EQ(contents_of(async_dir + "/" + name), contents_of(sync_dir + "/" + name)) << name << " differs";
}

std::string ckpt(const std::string& dir, int64_t step) { return dir + "/" + checkpoint_file_name(step); }

// Sync and async from scratch write the same checkpoints; a resume from the
// async run's middle one lands on the straight run's last, bit for bit.
void check_async_matches_sync(int ranks, const std::string& flags, const std::string& dir) {
  const auto sync = trainer_on(ranks, flags + " --checkpoint-dir " + dir + "/sync");
  ASSERT_EQ(sync.exit_code, 0) << sync.output;
  const auto async = trainer_on(ranks, flags + " --checkpoint-dir " + dir + "/async --async-checkpoint");
  ASSERT_EQ(async.exit_code, 0) << async.output;
  expect_same_checkpoints(dir + "/sync", dir + "/async");
  EXPECT_EQ(names_in(dir + "/sync").size(), 4u) << "steps 3, 6, 9, 12";

  const auto resumed = trainer_on(ranks, flags + " --async-checkpoint --resume " + ckpt(dir + "/async", 6) +
                                             " --checkpoint-dir " + dir + "/resumed");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("at step 6"), std::string::npos) << resumed.output;
  EXPECT_EQ(contents_of(ckpt(dir + "/resumed", 12)), contents_of(ckpt(dir + "/sync", 12)));
}

TEST_F(AsyncCheckpoint, SameCheckpointsAsSyncAndResumesBitwise) { check_async_matches_sync(1, kRun, dir); }

TEST_F(AsyncCheckpoint, SameCheckpointsAsSyncAtZeroOneAndThreeOnTwoRanks) {
#if !defined(DDP_MPIEXEC)
  GTEST_SKIP() << "built without MPI";
#else
  for (int stage : {1, 3}) {
    SCOPED_TRACE("--zero " + std::to_string(stage));
    const std::string sub = dir + "/z" + std::to_string(stage);
    fs::create_directories(sub);
    check_async_matches_sync(2, kRun + " --optimizer adamw --lr 3e-3 --zero " + std::to_string(stage), sub);
  }
#endif
}

TEST_F(AsyncCheckpoint, PruningKeepsTheSameFiles) {
  const std::string flags = kRun + " --keep-checkpoints 2";
  const auto sync = run(flags + " --checkpoint-dir " + dir + "/sync");
  ASSERT_EQ(sync.exit_code, 0) << sync.output;
  const auto async = run(flags + " --checkpoint-dir " + dir + "/async --async-checkpoint");
  ASSERT_EQ(async.exit_code, 0) << async.output;
  EXPECT_EQ(names_in(dir + "/async"), (std::set<std::string>{checkpoint_file_name(9), checkpoint_file_name(12)}));
  expect_same_checkpoints(dir + "/sync", dir + "/async");
}

// The write of step 4's checkpoint holds half-written on the writer thread
// while training goes on to step 6 (whose checkpoint then waits for it);
// SIGKILL there leaves step 2's checkpoint valid and step 4's temporary
// file, and a bare --resume passes over the latter, resumes from step 2 and
// finishes where a run never killed finishes.
TEST_F(AsyncCheckpoint, KillDuringTheBackgroundWriteResumesFromThePreviousCheckpoint) {
  const std::string ck = dir + "/ck";
  const std::string flags = kBase + " --checkpoint-every 2 --log-every 1 --async-checkpoint --checkpoint-dir " + ck;
  Child child("env DDP_TEST_CHECKPOINT_WRITE=hold:4 " + test::trainer_command() + flags, dir + "/out");
  ASSERT_TRUE(child.wait_for_output("the write of step 4's checkpoint holds half-written", 30)) << child.output();
  ASSERT_TRUE(child.wait_for_output("step 6/12", 30)) << "training did not go on during the write:\n" << child.output();
  EXPECT_FALSE(child.wait_for_output("step 7/12", 0.5)) << "step 6's checkpoint did not wait for step 4's write";
  kill(child.pid(), SIGKILL);
  ASSERT_TRUE(child.wait_exit(10).has_value());

  const std::string temp = ckpt(ck, 4) + ".tmp." + std::to_string(child.pid());
  EXPECT_EQ(names_in(ck), (std::set<std::string>{checkpoint_file_name(2), fs::path(temp).filename().string()}));
  EXPECT_EQ(read_checkpoint(ckpt(ck, 2)).step, 2);
  EXPECT_EQ(fs::file_size(temp), fs::file_size(ckpt(ck, 2)) / 2) << "not held half-way";

  const auto resumed = run(flags + " --resume");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_EQ(lines_with(resumed.output, "resume: skipping " + temp + ": incomplete write").size(), 1u) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from " + ckpt(ck, 2) + " at step 2"), std::string::npos) << resumed.output;
  const auto straight = run(kRun + " --checkpoint-dir " + dir + "/straight");
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  EXPECT_EQ(contents_of(ckpt(ck, 12)), contents_of(ckpt(dir + "/straight", 12)));
}

// The run is not done before its last checkpoint is whole: held
// half-way, the run neither says "done:" nor exits.
TEST_F(AsyncCheckpoint, TheEndOfTheRunWaitsForTheLastWrite) {
  const std::string ck = dir + "/ck";
  Child child("env DDP_TEST_CHECKPOINT_WRITE=hold:12 " + test::trainer_command() + kRun +
                  " --async-checkpoint --checkpoint-dir " + ck,
              dir + "/out");
  ASSERT_TRUE(child.wait_for_output("the write of step 12's checkpoint holds half-written", 30)) << child.output();
  EXPECT_FALSE(child.wait_for_output("done:", 0.5)) << child.output();
  EXPECT_FALSE(child.poll_exit()) << child.output();
  kill(child.pid(), SIGKILL);
  ASSERT_TRUE(child.wait_exit(10).has_value());
  EXPECT_EQ(find_newest_valid_checkpoint(ck).newest_valid, ckpt(ck, 9));
}

// A background write that fails stops the run at the next step boundary:
// one error line naming the step and the file, exit 1, the previous
// checkpoint kept and no temporary file left. The synchronous write's
// failure is its own one line; at two ranks the job ends.
TEST_F(AsyncCheckpoint, AFailedBackgroundWriteIsOneErrorLine) {
  const std::string ck = dir + "/ck";
  const auto failed = test::run_command("env DDP_TEST_CHECKPOINT_WRITE=fail:6 " + test::trainer_command() + kRun +
                                        " --async-checkpoint --checkpoint-dir " + ck + " 2>&1");
  EXPECT_EQ(failed.exit_code, 1) << failed.output;
  const std::string line = test::single_error_line(failed.output);
  EXPECT_NE(line.find("the checkpoint of step 6, written in the background (--async-checkpoint), failed: cannot "
                      "write checkpoint " +
                      ckpt(ck, 6) + ": writing " + ckpt(ck, 6) + ".tmp."),
            std::string::npos)
      << failed.output;
  EXPECT_EQ(failed.output.find("done:"), std::string::npos) << failed.output;
  EXPECT_EQ(names_in(ck), std::set<std::string>{checkpoint_file_name(3)});
  EXPECT_EQ(read_checkpoint(ckpt(ck, 3)).step, 3);

#if defined(DDP_MPIEXEC)
  // Rank 0 alone fails while its peer trains on: the job ends (MPI_Abort), not hangs.
  const auto two =
      test::run_command("env DDP_TEST_CHECKPOINT_WRITE=fail:6 " + test::mpiexec_prefix(2) + test::trainer_command() +
                        kRun + " --zero 1 --async-checkpoint --checkpoint-dir " + dir + "/two 2>&1");
  EXPECT_NE(two.exit_code, 0) << two.output;
  EXPECT_EQ(lines_with(two.output, "ddp_train: error (rank 0 on ").size(), 1u) << two.output;
  EXPECT_NE(two.output.find("the checkpoint of step 6, written in the background"), std::string::npos) << two.output;
  EXPECT_EQ(names_in(dir + "/two"), std::set<std::string>{checkpoint_file_name(3)});
#endif

  const auto sync = test::run_command("env DDP_TEST_CHECKPOINT_WRITE=fail:6 " + test::trainer_command() + kRun +
                                      " --checkpoint-dir " + dir + "/sync 2>&1");
  EXPECT_EQ(sync.exit_code, 1) << sync.output;
  EXPECT_NE(test::single_error_line(sync.output).find("cannot write checkpoint " + ckpt(dir + "/sync", 6)),
            std::string::npos)
      << sync.output;
}

// A stop waits for the background write before it names its checkpoint.
TEST_F(AsyncCheckpoint, SigtermCheckpointIsWholeWhenTheRunSaysSo) {
  const std::string ck = dir + "/ck";
  Child child(test::trainer_command() +
                  " --data synthetic --steps 100000000 --log-every 50 --checkpoint-every 1 --keep-checkpoints 2 "
                  "--async-checkpoint --checkpoint-dir " +
                  ck,
              dir + "/out");
  ASSERT_TRUE(child.wait_for_output("samples/s", 30)) << child.output();
  kill(child.pid(), SIGTERM);
  const auto status = child.wait_exit(30);
  ASSERT_TRUE(status.has_value()) << "still running 30 s after SIGTERM";
  EXPECT_EQ(test::exit_code(*status), 128 + SIGTERM) << child.output();
  const auto stopped = lines_with(child.output(), "stopped by SIGTERM at step ");
  ASSERT_EQ(stopped.size(), 1u) << child.output();
  const int64_t step = std::stoll(stopped[0].substr(stopped[0].find("at step ") + 8));
  EXPECT_EQ(names_in(ck), (std::set<std::string>{checkpoint_file_name(step - 1), checkpoint_file_name(step)}));
  EXPECT_EQ(read_checkpoint(ckpt(ck, step)).step, step);
}

// The step records carry the time the loop was blocked by checkpoints in
// their interval (and, async, the wait and the background writes), the
// summary the run's; without --checkpoint-dir there is no such field.
TEST_F(AsyncCheckpoint, MetricsSayWhatCheckpointsCostTheLoop) {
  auto records = [](const std::string& path, const std::string& event) {
    return lines_with(test::read_text(path), "\"event\":\"" + event + "\"");
  };
  const std::string flags = kBase + " --log-every 3 --metrics ";
  const std::string every3 = " --checkpoint-every 3 --checkpoint-dir " + dir;
  ASSERT_EQ(run(flags + dir + "/async.jsonl --async-checkpoint" + every3 + "/a").exit_code, 0);
  ASSERT_EQ(run(flags + dir + "/sync.jsonl" + every3 + "/s").exit_code, 0);
  ASSERT_EQ(run(flags + dir + "/none.jsonl").exit_code, 0);
  for (const char* event : {"step", "summary"}) {
    SCOPED_TRACE(event);
    for (const std::string& r : records(dir + "/async.jsonl", event)) {
      EXPECT_NE(r.find("\"checkpoint_blocked_s\":"), std::string::npos) << r;
      EXPECT_NE(r.find("\"checkpoint_wait_s\":"), std::string::npos) << r;
      EXPECT_NE(r.find("\"checkpoint_write_s\":"), std::string::npos) << r;
    }
    for (const std::string& r : records(dir + "/sync.jsonl", event)) {
      EXPECT_NE(r.find("\"checkpoint_blocked_s\":"), std::string::npos) << r;
      EXPECT_EQ(r.find("\"checkpoint_write_s\":"), std::string::npos) << r;
    }
    for (const std::string& r : records(dir + "/none.jsonl", event))
      EXPECT_EQ(r.find("checkpoint_"), std::string::npos) << r;
    EXPECT_FALSE(records(dir + "/async.jsonl", event).empty());
  }
  // Step 3's checkpoint is taken after step 3's record: step 6's interval
  // holds its blocked time, and by step 9 its background write is collected.
  const std::vector<std::string> steps = records(dir + "/async.jsonl", "step");
  ASSERT_EQ(steps.size(), 4u);
  EXPECT_NE(steps[0].find("\"checkpoint_blocked_s\":0,"), std::string::npos) << steps[0];
  EXPECT_EQ(steps[1].find("\"checkpoint_blocked_s\":0,"), std::string::npos) << steps[1];
}

TEST_F(AsyncCheckpoint, RefusedWhereItMeansNothing) {
  expect_refused_before_training(kBase + " --async-checkpoint", {"--async-checkpoint needs --checkpoint-dir"});
  expect_refused_before_training(
      "--data synthetic --eval-only --resume --checkpoint-dir " + dir + " --async-checkpoint",
      {"--async-checkpoint has no meaning with --eval-only"});
  const auto bad = test::run_command("env DDP_TEST_CHECKPOINT_WRITE=hold " + test::trainer_command() + kRun +
                                     " --checkpoint-dir " + dir + "/ck 2>&1");
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_NE(test::single_error_line(bad.output).find("DDP_TEST_CHECKPOINT_WRITE='hold' is not hold:STEP, fail:STEP or slow:STEP"),
            std::string::npos)
      << bad.output;
  EXPECT_FALSE(fs::exists(dir + "/ck")) << "an output was touched before the refusal";
}

}  // namespace
}  // namespace ddp
