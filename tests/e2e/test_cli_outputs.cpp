// test_cli_outputs.cpp: build/ddp_train as a careless user runs it, about
// what it writes: no output path may be one of its inputs, a file that is
// not ours is never overwritten, every output is checked before the first
// step, pruning touches only this run's checkpoints, and a resume must fit
// the data and world it continues on.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "support/cli_test.h"
#include "support/test_support.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/checkpoint_dir.h"

namespace ddp {
namespace {
namespace fs = std::filesystem;

class CliOutputs : public test::CliTest {
 protected:
  CliOutputs() : CliTest("cli_outputs") {}
  void SetUp() override {
    rng.seed(test::test_seed());
    test::write_random_csv(dir + "/train.csv", 40, rng);
    test::write_random_csv(dir + "/test.csv", 12, rng);
  }

  // batch 4 on 40 samples: 10 steps per epoch.
  std::string data(const std::string& train = "", const std::string& layers = "4,8,3") const {
    return "--data csv --train-csv " + (train.empty() ? dir + "/train.csv" : train) + " --test-csv " + dir +
           "/test.csv --layers " + layers + " --batch-size 4 --log-every 1 ";
  }
  // Refused: non-zero, exactly one error line holding every word, no step trained.
  void expect_refused(const std::string& args, std::initializer_list<std::string> words) const {
    expect_refused_before_training(args, words);
  }
  std::mt19937_64 rng;
};

TEST_F(CliOutputs, AnOutputThatIsAnInputIsRefusedAndLeftIntact) {
  const std::string ck = dir + "/ck";
  ASSERT_EQ(run(data() + "--steps 2 --checkpoint-dir " + ck + " --save-weights " + dir + "/w").exit_code, 0);
  const std::string checkpoint = ck + "/" + checkpoint_file_name(2);
  std::ofstream(dir + "/c.ini") << "steps = 2\n";
  fs::create_symlink(dir + "/train.csv", dir + "/link.csv");
  const std::vector<std::string> files = {dir + "/train.csv", dir + "/test.csv", dir + "/c.ini", checkpoint};
  std::vector<std::string> before;
  for (const std::string& f : files) before.push_back(test::read_text(f));

  expect_refused(data() + "--steps 2 --metrics " + dir + "/train.csv", {"--metrics", "train.csv", "input"});
  expect_refused(data() + "--steps 2 --metrics " + dir + "/link.csv", {"--metrics", "input"});  // through a link
  expect_refused(data() + "--steps 2 --metrics " + dir + "/./test.csv", {"--metrics", "input"});
  expect_refused(data() + "--config " + dir + "/c.ini --metrics " + dir + "/c.ini", {"--metrics", "c.ini"});
  expect_refused(data() + "--steps 3 --resume " + checkpoint + " --metrics " + checkpoint, {"--metrics", "input"});
  expect_refused(data() + "--steps 2 --init-weights " + dir + "/w --save-weights " + dir + "/w",
                 {"--save-weights", "input"});
  expect_refused(data() + "--steps 2 --init-weights " + dir + "/w --checkpoint-dir " + dir + "/w",
                 {"--checkpoint-dir", "input"});
  for (size_t i = 0; i < files.size(); ++i)
    EXPECT_EQ(test::read_text(files[i]), before[i]) << files[i] << " was changed";
  // The checkpoint is still whole: it resumes.
  EXPECT_EQ(run(data() + "--steps 3 --resume " + checkpoint).exit_code, 0);
}

// A rank's --trace file (t.json -> t.rank0.json) is an output like the
// others: not an input (directly, or named so that its rank file is one), not
// a user's file (unless --overwrite), a directory or a link, not the
// --metrics file; an earlier trace is replaced. Each of these once trained
// and then wrote over it.
TEST_F(CliOutputs, ATraceFileIsCheckedAsEveryOutputIs) {
  const std::string train = dir + "/train.csv";
  fs::copy_file(train, dir + "/train.rank0.csv");
  std::ofstream(dir + "/mine.rank0.json") << "my notes\n";
  fs::create_directory(dir + "/d.rank0.json");
  fs::create_symlink(train, dir + "/link.rank0.json");
  const std::string before = test::read_text(train), copy_before = test::read_text(dir + "/train.rank0.csv");
  expect_refused(data(dir + "/train.rank0.csv") + "--steps 2 --trace " + train, {"--trace", "input"});
  expect_refused(data() + "--steps 2 --trace " + dir + "/link.json", {"--trace", "input"});
  expect_refused(data() + "--steps 2 --trace " + dir + "/mine.json", {"mine.rank0.json", "not a file ddp_train wrote"});
  expect_refused(data() + "--steps 2 --trace " + dir + "/d.json", {"d.rank0.json", "a directory"});
  expect_refused(data() + "--steps 2 --trace " + dir + "/t.json --metrics " + dir + "/t.rank0.json",
                 {"t.rank0.json", "--metrics"});
  EXPECT_EQ(test::read_text(train), before);
  EXPECT_EQ(test::read_text(dir + "/train.rank0.csv"), copy_before);
  EXPECT_EQ(test::read_text(dir + "/mine.rank0.json"), "my notes\n");
  EXPECT_TRUE(fs::is_symlink(dir + "/link.rank0.json"));
  EXPECT_FALSE(fs::exists(dir + "/t.rank0.json"));
  ASSERT_EQ(run(data() + "--steps 2 --trace " + dir + "/t.json").exit_code, 0);
  const test::CommandResult again = run(data() + "--steps 2 --trace " + dir + "/t.json");
  EXPECT_EQ(again.exit_code, 0) << again.output;  // an earlier trace is replaced, saying so
  EXPECT_NE(again.output.find("t.rank0.json: replacing it (written by"), std::string::npos) << again.output;
  // A copy of a trace is a file of the user's: refused until --overwrite.
  fs::copy_file(dir + "/t.rank0.json", dir + "/copy.rank0.json");
  expect_refused(data() + "--steps 2 --trace " + dir + "/copy.json", {"copy.rank0.json", "--overwrite"});
  const test::CommandResult overwrite = run(data() + "--steps 2 --overwrite --trace " + dir + "/mine.json");
  EXPECT_EQ(overwrite.exit_code, 0) << overwrite.output;
  EXPECT_NE(test::read_text(dir + "/mine.rank0.json"), "my notes\n");
  std::ofstream(dir + "/empty.rank0.json").flush();
  const test::CommandResult empty = run(data() + "--steps 2 --trace " + dir + "/empty.json");
  EXPECT_EQ(empty.exit_code, 0) << empty.output;  // so is an empty file: nothing in it to lose
}

TEST_F(CliOutputs, AMetricsFileNotOursIsNeverOverwritten) {
  const std::string notes = dir + "/notes.jsonl";
  std::ofstream(notes) << "my own notes\n";
  expect_refused(data() + "--steps 2 --metrics " + notes, {"--metrics", "not a file ddp_train wrote"});
  EXPECT_EQ(test::read_text(notes), "my own notes\n");
  // Another tool's JSON Lines that look like ours (an "event" first): not ours either.
  const std::string other = dir + "/other.jsonl";
  std::ofstream(other) << "{\"event\":\"epoch\",\"tool\":\"another\"}\n";
  expect_refused(data() + "--steps 2 --metrics " + other, {"--metrics", "--overwrite"});
  EXPECT_EQ(test::read_text(other), "{\"event\":\"epoch\",\"tool\":\"another\"}\n");
  const test::CommandResult overwrite = run(data() + "--steps 2 --overwrite --metrics " + other);
  EXPECT_EQ(overwrite.exit_code, 0) << overwrite.output;
  EXPECT_NE(overwrite.output.find("replacing it (--overwrite)"), std::string::npos) << overwrite.output;
  // Ours from an earlier run: replaced, and said so; empty: taken.
  const std::string m = dir + "/m.jsonl";
  ASSERT_EQ(run(data() + "--steps 2 --metrics " + m).exit_code, 0);
  const test::CommandResult again = run(data() + "--steps 2 --metrics " + m);
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("--metrics " + m + ": replacing it (written by"), std::string::npos) << again.output;
  EXPECT_EQ(test::read_text(m).rfind("{\"event\":", 0), 0u);
  expect_refused(data() + "--steps 2 --metrics " + dir, {"--metrics", "directory"});
  expect_refused(data() + "--steps 2 --metrics ''", {"--metrics", "empty"});
}

TEST_F(CliOutputs, OutputsThatCannotBeWrittenAreRefusedBeforeTraining) {
  std::ofstream(dir + "/a-file") << "x";
  expect_refused(data() + "--steps 2 --checkpoint-dir " + dir + "/a-file", {"--checkpoint-dir", "not a directory"});
  expect_refused(data() + "--steps 2 --save-weights " + dir + "/a-file/w", {"--save-weights", "a-file"});
  expect_refused(data() + "--steps 2 --metrics " + dir + "/no-such-dir/m.jsonl", {"--metrics", "no-such-dir"});
  expect_refused(data() + "--steps 2 --checkpoint-dir ''", {"--checkpoint-dir", "empty"});
  EXPECT_EQ(test::read_text(dir + "/a-file"), "x");
}

// An output whose directory is a file or a loop of links is one line naming
// the directory as given (trainer/io/output_directory.h), before training:
// a --trace through a file once trained and then wrote no trace, and
// --metrics said "Permission denied".
TEST_F(CliOutputs, AnOutputsDirectoryThatIsAFileOrALoopIsNamedAsGiven) {
  std::ofstream(dir + "/afile") << "x";
  fs::create_symlink(dir + "/loop1", dir + "/loop2");
  fs::create_symlink(dir + "/loop2", dir + "/loop1");
  const std::string afile = dir + "/afile", loop = dir + "/loop1";
  expect_refused(data() + "--steps 2 --trace " + afile + "/t.json",
                 {"--trace " + afile + "/t.rank0.json: its directory " + afile + " is a file, not a directory"});
  expect_refused(data() + "--steps 2 --metrics " + afile + "/m.jsonl", {"its directory " + afile + " is a file"});
  expect_refused(data() + "--steps 2 --metrics " + loop + "/m.jsonl",
                 {"its directory " + loop + " is a loop of symbolic links"});
  expect_refused(data() + "--steps 2 --save-weights " + afile + "/w.safetensors",
                 {"--save-weights", "its directory " + afile + " is a file"});
  EXPECT_EQ(test::read_text(afile), "x");
}

TEST_F(CliOutputs, OutputsNeverLandOnEachOtherAndARefusalCreatesNothing) {
  const std::string ck = dir + "/ck", w = dir + "/w";
  expect_refused(data() + "--steps 3 --checkpoint-dir " + ck + " --metrics " + ck + "/" + checkpoint_file_name(3),
                 {"--metrics", "checkpoint file name"});
  expect_refused(data() + "--steps 3 --save-weights " + w + " --metrics " + w + "/layer0.weight.npy",
                 {"--metrics", "--save-weights writes"});
  expect_refused(data() + "--steps 3 --checkpoint-dir " + ck + " --save-weights " + ck + "/" + checkpoint_file_name(3),
                 {"--save-weights", "checkpoint file name"});
  expect_refused(data() + "--steps 3 --checkpoint-dir " + ck + " --save-weights " + w + " --metrics " + dir +
                     "/no-such-dir/m.jsonl",
                 {"--metrics", "no-such-dir"});
  EXPECT_FALSE(fs::exists(ck)) << "a refused run created --checkpoint-dir";
  EXPECT_FALSE(fs::exists(w)) << "a refused run created --save-weights";
}

TEST_F(CliOutputs, ABareResumeWithoutACheckpointDirIsRefusedBeforeTheDataIsRead) {
  expect_refused(data(dir + "/missing.csv") + "--steps 2 --resume", {"--resume", "--checkpoint-dir"});
}

TEST_F(CliOutputs, SaveWeightsReplacesOnlyAnEarlierSavesFiles) {
  const std::string w = dir + "/w";
  fs::create_directories(w);
  std::ofstream(w + "/layer1.bias.npy") << "my notes, not an array\n";
  std::ofstream(w + "/layer0.weight.npy.tmp") << "mine too\n";
  expect_refused(data() + "--steps 2 --save-weights " + w, {"--save-weights", "layer1.bias.npy", "not a file"});
  // A user's array of the right name and kind (a copy: not what ddp_train wrote) is refused too.
  ASSERT_EQ(run(data() + "--steps 2 --save-weights " + dir + "/first").exit_code, 0);
  fs::remove(w + "/layer1.bias.npy");
  fs::copy_file(dir + "/first/layer1.bias.npy", w + "/layer1.bias.npy");
  expect_refused(data() + "--steps 2 --save-weights " + w, {"--save-weights", "layer1.bias.npy", "--overwrite"});
  EXPECT_EQ(test::read_text(w + "/layer1.bias.npy"), test::read_text(dir + "/first/layer1.bias.npy"));
  fs::remove(w + "/layer1.bias.npy");
  const test::CommandResult r = run(data() + "--steps 2 --save-weights " + w);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(test::read_text(w + "/layer0.weight.npy.tmp"), "mine too\n");  // the writer's temporary is its own
  const test::CommandResult again = run(data() + "--steps 2 --save-weights " + w);
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("weights: 4 file(s) of an earlier save in " + w + " will be replaced at the end"),
            std::string::npos)
      << again.output;
}

// `ddp_train | head`: the reader goes away; the run still ends with its
// checkpoint instead of dying of SIGPIPE.
TEST_F(CliOutputs, AReaderOfStdoutThatGoesAwayDoesNotEndTheRun) {
  const std::string ck = dir + "/ck";
  std::ofstream(dir + "/pipe.sh") << "set -o pipefail\ntimeout -k 2 60 " << DDP_TRAIN_BINARY
                                  << " --device cpu --threads 1 " << data() << "--epochs 40 --checkpoint-dir " << ck
                                  << " 2>/dev/null | head -1 >/dev/null\n";
  const test::CommandResult r = test::run_command("bash " + dir + "/pipe.sh 2>&1");
  EXPECT_EQ(r.exit_code, 0) << "ddp_train's exit status through the pipe: " << r.exit_code << "\n" << r.output;
  EXPECT_TRUE(fs::exists(ck + "/" + checkpoint_file_name(400))) << "no final checkpoint";
}

TEST_F(CliOutputs, AFreshRunRefusesADirectoryWithAnotherRunsCheckpoints) {
  const std::string ck = dir + "/ck";
  ASSERT_EQ(run(data() + "--steps 3 --checkpoint-dir " + ck).exit_code, 0);
  const std::string theirs = test::read_text(ck + "/" + checkpoint_file_name(3));
  expect_refused(data() + "--steps 3 --checkpoint-dir " + ck + " --keep-checkpoints 1",
                 {"--checkpoint-dir", "already holds 1 checkpoint", "--resume"});
  EXPECT_EQ(test::read_text(ck + "/" + checkpoint_file_name(3)), theirs);
}

// The case: another run's checkpoint and another model's sit in the
// directory; a resumed run with --keep-checkpoints 1 deletes only its own
// older ones.
TEST_F(CliOutputs, PruningTouchesOnlyThisRunsCheckpoints) {
  const std::string ck = dir + "/ck";
  ASSERT_EQ(run(data() + "--steps 10 --checkpoint-dir " + ck + " --checkpoint-every 3 --stop-after-steps 3").exit_code,
            0);
  ASSERT_EQ(run(data() + "--steps 2 --checkpoint-dir " + dir + "/theirs").exit_code, 0);
  ASSERT_EQ(run(data("", "4,5,3") + "--steps 1 --checkpoint-dir " + dir + "/model-b").exit_code, 0);
  fs::copy_file(dir + "/theirs/" + checkpoint_file_name(2), ck + "/" + checkpoint_file_name(2));
  fs::copy_file(dir + "/model-b/" + checkpoint_file_name(1), ck + "/" + checkpoint_file_name(1));
  const std::string theirs = test::read_text(ck + "/" + checkpoint_file_name(2));
  const test::CommandResult r =
      run(data() + "--steps 10 --checkpoint-dir " + ck + " --checkpoint-every 1 --keep-checkpoints 1 --resume");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from " + ck + "/" + checkpoint_file_name(3)), std::string::npos) << r.output;
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(ck)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  // Ours: only the newest (step 10) is left; the other run's and model's stay.
  EXPECT_EQ(names,
            (std::vector<std::string>{checkpoint_file_name(1), checkpoint_file_name(2), checkpoint_file_name(10)}));
  EXPECT_EQ(test::read_text(ck + "/" + checkpoint_file_name(2)), theirs);
}

TEST_F(CliOutputs, AResumeRefusesToOverwriteAnotherRunsLaterCheckpoint) {
  const std::string ck = dir + "/ck";
  ASSERT_EQ(run(data() + "--steps 10 --checkpoint-dir " + ck + " --stop-after-steps 2").exit_code, 0);
  ASSERT_EQ(run(data() + "--steps 5 --checkpoint-dir " + dir + "/theirs").exit_code, 0);
  fs::copy_file(dir + "/theirs/" + checkpoint_file_name(5), ck + "/" + checkpoint_file_name(5));
  const std::string theirs = test::read_text(ck + "/" + checkpoint_file_name(5));
  expect_refused(data() + "--steps 10 --checkpoint-dir " + ck + " --resume " + ck + "/" + checkpoint_file_name(2),
                 {"another run's checkpoint", checkpoint_file_name(5), "overwrite"});
  EXPECT_EQ(test::read_text(ck + "/" + checkpoint_file_name(5)), theirs);
  // Its own later checkpoint (a resume from an earlier one) is replaced, and said so.
  ASSERT_EQ(
      run(data() + "--steps 10 --checkpoint-dir " + dir + "/own --stop-after-steps 4 --checkpoint-every 2").exit_code,
      0);
  const test::CommandResult r = run(data() + "--steps 10 --checkpoint-dir " + dir + "/own --resume " + dir + "/own/" +
                                    checkpoint_file_name(2) + " --stop-after-steps 2");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("1 later checkpoint(s) of this run (steps 4 to 4)"), std::string::npos) << r.output;
}

// A resume already at its run's end trains nothing and writes nothing: the
// other run's checkpoint at that step in --checkpoint-dir stays as it was.
TEST_F(CliOutputs, AResumeThatTrainsNothingWritesNothing) {
  ASSERT_EQ(run(data() + "--steps 4 --checkpoint-dir " + dir + "/a").exit_code, 0);
  ASSERT_EQ(run(data() + "--steps 4 --seed 5 --checkpoint-dir " + dir + "/b").exit_code, 0);
  const std::string theirs = dir + "/b/" + checkpoint_file_name(4), before = test::read_text(theirs);
  const test::CommandResult r =
      run(data() + "--steps 4 --checkpoint-dir " + dir + "/b --resume " + dir + "/a/" + checkpoint_file_name(4));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("nothing left to train"), std::string::npos) << r.output;
  EXPECT_EQ(test::read_text(theirs), before) << "the other run's step-4 checkpoint was replaced";
}

TEST_F(CliOutputs, AResumeMustFitTheDataItContinuesOn) {
  const std::string ck = dir + "/ck";
  // 5 of 10 steps of epoch 1: position 20 of 40 samples.
  ASSERT_EQ(run(data() + "--epochs 2 --checkpoint-dir " + ck + " --stop-after-steps 5").exit_code, 0);
  const std::string at5 = ck + "/" + checkpoint_file_name(5);
  test::write_random_csv(dir + "/small.csv", 16, rng);
  expect_refused(data(dir + "/small.csv") + "--epochs 2 --resume " + at5,
                 {"position", "sample 20", "16", "40 samples"});
  // A larger set holds the position: resumed, and the difference said.
  test::write_random_csv(dir + "/larger.csv", 48, rng);
  const test::CommandResult r = run(data(dir + "/larger.csv") + "--epochs 2 --resume " + at5);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("written on a training set of 40 samples, this run's has 48"), std::string::npos) << r.output;
}

TEST_F(CliOutputs, ResumeFlagsItCannotHonourAreNamedOrApplied) {
  const std::string ck = dir + "/ck";
  ASSERT_EQ(run(data() + "--steps 6 --checkpoint-dir " + ck + " --stop-after-steps 2").exit_code, 0);
  const std::string at2 = ck + "/" + checkpoint_file_name(2);
  const test::CommandResult named = run(data() + "--steps 6 --resume " + at2 + " --init-scale 1024");
  EXPECT_EQ(named.exit_code, 0) << named.output;
  EXPECT_NE(named.output.find("--init-scale 1024 is not used"), std::string::npos) << named.output;
  // A static scale is applied (it was silently the checkpoint's 65536 before).
  const std::string m = dir + "/m.jsonl";
  const test::CommandResult fixed =
      run(data() + "--steps 6 --resume " + at2 + " --loss-scale static:128 --metrics " + m);
  EXPECT_EQ(fixed.exit_code, 0) << fixed.output;
  EXPECT_NE(fixed.output.find("the loss scale is 128 (--loss-scale static:128)"), std::string::npos) << fixed.output;
  EXPECT_NE(test::read_text(m).find("\"loss_scale\":128,"), std::string::npos) << test::read_text(m);
  EXPECT_EQ(test::read_text(m).find("\"loss_scale\":65536,"), std::string::npos) << test::read_text(m);
}

}  // namespace
}  // namespace ddp
