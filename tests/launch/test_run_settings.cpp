// test_run_settings.cpp: what the start-up agreement compares
// (launch/cli/run_settings.h): every flag parse_options knows, by its value
// and not its spelling or source; input files by what they hold, not their
// paths; --threads not at all.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "launch/cli/options.h"
#include "launch/cli/run_settings.h"
#include "support/temp_dir.h"

namespace ddp {
namespace {

ParsedOptions parse(std::vector<std::string> args) {
  args.insert(args.begin(), "ddp_train");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  return parse_options(static_cast<int>(argv.size()), argv.data());
}

std::vector<Setting> settings(const std::vector<std::string>& args) { return run_settings(parse(args)); }

std::string value_of(const std::vector<Setting>& settings, const std::string& name) {
  for (const Setting& s : settings)
    if (s.name == name) return s.value;
  return "(no such setting)";
}

bool same(const std::vector<Setting>& a, const std::vector<Setting>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].name != b[i].name || a[i].value != b[i].value) return false;
  return true;
}

TEST(RunSettings, EveryFlagIsComparedByItsValueAndFitsTheRecord) {
  const ParsedOptions opts = parse({"--data", "synthetic"});
  std::string help = opts.help_text;
  const std::vector<Setting> all = run_settings(opts);
  EXPECT_LE(all.size(), kMaxSettings);
  // Every flag --help lists is a setting, except the rank-local ones.
  for (const Setting& s : opts.flag_values) {
    EXPECT_NE(help.find(s.name), std::string::npos) << s.name;
    if (!is_rank_local_flag(s.name.substr(2)) && !is_input_path_flag(s.name.substr(2))) {
      EXPECT_NE(value_of(all, s.name), "(no such setting)") << s.name;
    }
  }
  EXPECT_GT(opts.flag_values.size(), 100u);
  EXPECT_EQ(value_of(all, "--lr"), "0.05");
  EXPECT_EQ(value_of(all, "--zero"), "0");
  EXPECT_EQ(value_of(all, "--data"), "'synthetic'");
  EXPECT_EQ(value_of(all, "--device (resolved on each node)"), "cpu");
}

TEST(RunSettings, TheSameValueSpelledOrSourcedOtherwiseIsTheSame) {
  const test::TempDir dir("run-settings");
  std::ofstream(dir.path() + "/c.ini") << "lr = 1e-1\nseed = 7\n";
  const auto a = settings({"--data", "synthetic", "--lr", "0.1", "--seed", "7", "--threads", "1"});
  const auto b = settings({"--data", "synthetic", "--config", dir.path() + "/c.ini", "--threads", "2"});
  EXPECT_TRUE(same(a, b));
  EXPECT_FALSE(same(a, settings({"--data", "synthetic", "--lr", "0.1", "--seed", "8"})));
  EXPECT_FALSE(same(a, settings({"--data", "synthetic", "--lr", "0.1", "--seed", "7", "--precision", "bf16"})));
}

TEST(RunSettings, InputFilesAreComparedByWhatTheyHold) {
  const test::TempDir dir("run-settings-inputs");
  for (const char* name : {"a.csv", "copy.csv"}) std::ofstream(dir.path() + "/" + name) << "x,label\n1,0\n2,1\n";
  std::ofstream(dir.path() + "/other.csv") << "x,label\n1,0\n3,1\n";
  const auto with = [&](const std::string& train) {
    return settings({"--data", "csv", "--train-csv", dir.path() + "/" + train, "--test-csv", dir.path() + "/a.csv",
                     "--layers", "1,4,2"});
  };
  EXPECT_TRUE(same(with("a.csv"), with("copy.csv"))) << "two copies at two paths are one data set";
  EXPECT_FALSE(same(with("a.csv"), with("other.csv")));
  EXPECT_NE(value_of(with("a.csv"), "--train-csv (what it holds)").find("file, 16 bytes"), std::string::npos);
}

TEST(RunSettings, ABareResumeComparesTheCheckpointsItChoosesFrom) {
  const test::TempDir dir("run-settings-resume");
  const auto resume = [&] {
    return settings({"--data", "synthetic", "--resume", "--checkpoint-dir", dir.path(), "--steps", "4"});
  };
  const auto before = resume();
  std::ofstream(dir.path() + "/ckpt-step000000000002.safetensors") << "x";
  EXPECT_FALSE(same(before, resume()));
}

}  // namespace
}  // namespace ddp
