// test_cli_flags.cpp: the flags taken as a whole (launch/options_check.h):
// stray words, config files that are not config files, contradictions,
// flags without the flag that gives them a meaning, numbers outside their
// sense, ranks that do not exist. Each is one line naming the flag, before
// anything is read or written.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "support/cli_test.h"
#include "support/test_support.h"

namespace ddp {
namespace {
namespace fs = std::filesystem;

class CliFlags : public test::CliTest {
 protected:
  CliFlags() : CliTest("cli_flags") {}

  // Synthetic data: nothing on disk is needed, so only the flags can fail.
  void expect_refused(const std::string& args, std::initializer_list<std::string> words) const {
    const std::string metrics = dir + "/m.jsonl";
    const test::CommandResult r = run("--data synthetic " + args + " --metrics " + metrics, 30);
    EXPECT_EQ(r.exit_code, 1) << args << "\n" << r.output;
    const std::string found = test::single_error_line(r.output);
    EXPECT_FALSE(found.empty()) << args << ": not exactly one error line in\n" << r.output;
    for (const std::string& w : words)
      EXPECT_NE(found.find(w), std::string::npos) << args << ": '" << w << "' not in: " << found;
    EXPECT_FALSE(fs::exists(metrics)) << args << ": metrics written before the refusal";
    fs::remove(metrics);
  }
};

TEST_F(CliFlags, StrayWordsAreRefused) {
  expect_refused("--steps 2 0.1", {"'0.1'"});
  expect_refused("--steps 2 --lr 0.1 0.2", {"'0.2'"});
  expect_refused("--steps 2 -lr 0.1", {"-lr"});
}

// AdamW's flags, and its refusal of checkpoints until format v2 holds its
// moments and t: one line, and no checkpoint directory made.
TEST_F(CliFlags, AdamWFlagsOutsideTheirSenseAreRefused) {
  expect_refused("--steps 2 --optimizer adam", {"--optimizer", "'adam'", "sgd, adamw"});
  expect_refused("--steps 2 --beta1 0.5", {"--beta1", "needs --optimizer adamw"});
  expect_refused("--steps 2 --optimizer adamw --momentum 0.5", {"--momentum", "needs --optimizer sgd"});
  expect_refused("--steps 2 --optimizer adamw --beta2 1", {"--beta2", "[0, 1)"});
  expect_refused("--steps 2 --optimizer adamw --eps 0", {"--eps", "positive"});
}

TEST_F(CliFlags, AConfigThatIsNotAConfigIsRefused) {
  std::ofstream(dir + "/unknown.ini") << "steps = 2\nlearning-rate = 0.1\n";
  expect_refused("--config " + dir + "/unknown.ini", {"learning-rate"});
  expect_refused("--config " + dir, {"--config", "directory"});
  std::ofstream(dir + "/binary.ini", std::ios::binary).write("steps = 2\n\0\1\2", 13);
  expect_refused("--config " + dir + "/binary.ini", {"--config", "not a text file"});
  ASSERT_EQ(::mkfifo((dir + "/fifo.ini").c_str(), 0600), 0);
  expect_refused("--config " + dir + "/fifo.ini", {"--config", "FIFO"});  // never waits for a writer
  expect_refused("--config /dev/zero", {"--config", "/dev/zero"});
  expect_refused("--config ''", {"--config", "empty"});
  std::ofstream(dir + "/outer.ini") << "steps = 2\nconfig = " << dir << "/unknown.ini\n";
  expect_refused("--config " + dir + "/outer.ini", {"--config", "cannot name another config"});
}

TEST_F(CliFlags, AConfigWithAByteOrderMarkIsRead) {
  std::ofstream(dir + "/bom.ini") << "\xef\xbb\xbfsteps = 2\nlayers = 10,7,10\n";
  const test::CommandResult r =
      test::run_command("timeout -k 2 30 " + std::string(DDP_TRAIN_BINARY) +
                        " --device cpu --threads 1 --data synthetic --config " + dir + "/bom.ini 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("MLP 10-7-10"), std::string::npos) << r.output;
}

TEST_F(CliFlags, ContradictionsAreRefused) {
  expect_refused("--steps 2 --init-weights " + dir + " --resume", {"--init-weights", "--resume"});
  expect_refused("--steps 2 --train-x " + dir + "/x.npy", {"--train-x", "--data npy", "synthetic"});
  expect_refused("--steps 2 --train-csv " + dir + "/t.csv", {"--train-csv", "--data csv"});
  expect_refused("--steps 2 --epochs 3", {"--steps", "--epochs"});
  expect_refused("--bench --checkpoint-dir " + dir + "/ck", {"has no meaning with --bench"});
  expect_refused("--steps 2 --bench-steps 5", {"--bench-steps", "needs --bench"});
  expect_refused("--steps 2 --resume", {"--resume", "--checkpoint-dir"});
}

// "The command line wins": a config file's flag that the command line
// overrides or makes meaningless is dropped, not an error; within the config
// (or within the command line) the same disagreement is refused.
TEST_F(CliFlags, TheCommandLineWinsOverTheConfigFile) {
  std::ofstream(dir + "/shared.ini") << "epochs = 3\ntrain-csv = " << dir << "/t.csv\nkeep-checkpoints = 2\n"
                                     << "init-scale = 1024\nlr-gamma = 0.5\n";
  const std::string run = "timeout -k 2 30 " + test::trainer_command() + " --config " + dir + "/shared.ini ";
  const test::CommandResult r = test::run_command(run + "--data synthetic --steps 2 --loss-scale none 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("; 2 steps (64 per epoch)"), std::string::npos) << r.output;
  std::ofstream(dir + "/steps.ini") << "steps = 5\n";
  const test::CommandResult e = test::run_command(run.substr(0, run.find("--config")) + "--config " + dir +
                                                  "/steps.ini --data synthetic --epochs 1 2>&1");
  EXPECT_EQ(e.exit_code, 0) << e.output;
  EXPECT_NE(e.output.find("; 64 steps (64 per epoch)"), std::string::npos) << e.output;
  std::ofstream(dir + "/both.ini") << "steps = 5\nepochs = 2\n";
  expect_refused("--config " + dir + "/both.ini", {"--steps", "--epochs"});
}

TEST_F(CliFlags, FlagsWithoutTheFlagThatGivesThemMeaningAreRefused) {
  expect_refused("--steps 4 --stop-after-steps 2", {"--stop-after-steps", "needs --checkpoint-dir"});
  expect_refused("--steps 4 --keep-checkpoints 2", {"--keep-checkpoints", "--checkpoint-dir"});
  expect_refused("--steps 4 --checkpoint-every 2", {"--checkpoint-every", "--checkpoint-dir"});
  expect_refused("--steps 4 --lr-step-size 2", {"--lr-step-size", "--lr-schedule step"});
  expect_refused("--steps 4 --lr-gamma 0.5 --lr-schedule cosine", {"--lr-gamma", "--lr-schedule step"});
  expect_refused("--steps 4 --loss-scale none --hysteresis 2", {"--hysteresis", "dynamic"});
  expect_refused("--steps 4 --loss-scale static:8 --init-scale 8", {"--init-scale", "dynamic"});
  expect_refused("--steps 4 --stall-rank 1", {"--stall-rank", "--stall-at-step"});
}

TEST_F(CliFlags, NumbersOutsideTheirSenseAreRefused) {
  const std::pair<std::string, std::vector<std::string>> cases[] = {
      {"--lr-schedule step --lr-gamma 0", {"--lr-gamma"}},
      {"--lr-schedule step --lr-gamma -0.5", {"--lr-gamma"}},
      {"--momentum 1", {"--momentum"}},
      {"--momentum 1.5", {"--momentum"}},
      {"--growth-factor 1", {"--growth-factor"}},
      {"--growth-factor 0.5", {"--growth-factor"}},
      {"--growth-factor inf", {"--growth-factor"}},
      {"--backoff-factor 1", {"--backoff-factor"}},
      {"--min-loss-scale 131072", {"--min-loss-scale", "--init-scale"}},
      {"--batch-size 4000000000", {"--batch-size"}},
      {"--batch-size 1073741824 --grad-accum 1073741824", {"--batch-size", "--grad-accum"}},
      {"--global-batch 0", {"--global-batch"}},
      {"--inject-overflow 2 --inject-overflow-rank 1", {"--inject-overflow-rank 1", "no such rank"}},
      {"--stall-at-step 2 --stall-rank 3", {"--stall-rank 3", "no such rank"}},
      {"--bucket-mb 1e300", {"--bucket-mb"}},
      // Values the run cannot use: once taken silently (a wrapped seed, an Inf scale).
      {"--seed -1", {"--seed must be >= 0", "-1"}},
      {"--init-scale 1e39", {"--init-scale 1e+39", "beyond FP32's largest value"}},
      {"--loss-scale static:4e38", {"--loss-scale static:<S> 4e+38", "beyond FP32"}},
      {"--init-scale 1e39 --min-loss-scale 5e38", {"--init-scale", "beyond FP32"}},
  };
  for (const auto& [args, words] : cases) {
    SCOPED_TRACE(args);
    const std::string full = "--steps 2 " + args;
    switch (words.size()) {
      case 1:
        expect_refused(full, {words[0]});
        break;
      default:
        expect_refused(full, {words[0], words[1]});
        break;
    }
  }
}

}  // namespace
}  // namespace ddp
