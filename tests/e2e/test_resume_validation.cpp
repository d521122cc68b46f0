// test_resume_validation.cpp: build/ddp_train --resume on a checkpoint whose
// checksum holds but one field is out of range (written with
// serialize_checkpoint, so only the contents check can catch it) ends with
// exit 1 and one error line naming the field, never a crash or a hang; and
// every checkpoint a real run writes, through skipped steps, short epochs
// and a resume, passes validate_checkpoint_contents (its bounds are not
// tighter than the trainer).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "support/cli_test.h"
#include "support/test_support.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/checkpoint_dir.h"
#include "trainer/checkpoint/checkpoint_validation.h"

namespace ddp {
namespace {
namespace fs = std::filesystem;

// 20 s is far beyond a tiny run's time. SIGKILL, since ddp_train takes
// SIGTERM as a request to stop at the next step boundary, which a hung step
// never reaches: exit status 137 means it hung.
constexpr int kHungExitCode = 137;
test::CommandResult run_trainer(const std::string& args) {
  return test::run_command("timeout -s KILL 20 " + test::trainer_command() + " " + args + " 2>&1");
}

// The error is exactly one line that starts with "ddp_train: error" ("" otherwise).
std::string error_line(const test::CommandResult& r) {
  std::istringstream in(r.output);
  std::string line, found;
  int count = 0;
  while (std::getline(in, line))
    if (line.rfind("ddp_train: error", 0) == 0) {
      found = line;
      ++count;
    }
  return count == 1 ? found : "";
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

void put_be32(std::vector<uint8_t>& v, uint32_t x) {
  for (int s = 24; s >= 0; s -= 8) v.push_back(static_cast<uint8_t>(x >> s));
}

class ResumeValidation : public test::CliTest {
 protected:
  // 40 IDX images of 4x4 with labels 0..9: an epoch of 3 steps at batch 16
  // (2 with --drop-last).
  ResumeValidation() : CliTest("resume-validation") {}
  void SetUp() override {
    std::vector<uint8_t> images = {0, 0, 0x08, 3}, labels = {0, 0, 0x08, 1};
    put_be32(images, 40);
    put_be32(images, 4);
    put_be32(images, 4);
    put_be32(labels, 40);
    for (uint32_t i = 0; i < 40 * 16; ++i) images.push_back(static_cast<uint8_t>(i * 7));
    for (uint32_t i = 0; i < 40; ++i) labels.push_back(static_cast<uint8_t>(i % 10));
    write_bytes(dir + "/img", images);
    write_bytes(dir + "/lab", labels);
  }
  std::string data_args() const {
    return "--data idx --train-images " + dir + "/img --train-labels " + dir + "/lab --test-images " + dir +
           "/img --test-labels " + dir + "/lab --layers 16,8,10 --batch-size 16";
  }
};

TEST_F(ResumeValidation, OutOfRangeFieldWithValidChecksumIsOneErrorLine) {
  const std::string ck = dir + "/ck";
  const test::CommandResult first = run_trainer(data_args() + " --steps 4 --checkpoint-dir " + ck);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const TrainState good = read_checkpoint(ck + "/" + checkpoint_file_name(4));
  ASSERT_EQ(good.step, 4);

  std::mt19937_64 rng(test::test_seed());
  const size_t weight_at = rng() % good.master_weights_fp32.size();
  const size_t momentum_at = rng() % good.momentum_fp32.size();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const struct {
    const char* what;
    std::function<void(TrainState&)> corrupt;
    std::vector<std::string> words;
  } cases[] = {
      {"epoch -1", [](TrainState& s) { s.epoch = -1; }, {"epoch is -1"}},
      {"step -5", [](TrainState& s) { s.step = -5; }, {"step is -5"}},
      {"offset -16", [](TrainState& s) { s.epoch_sample_offset = -16; }, {"epoch_sample_offset is -16"}},
      {"epoch > step", [](TrainState& s) { s.epoch = 9; }, {"epoch is 9", "step 4"}},
      {"skipped > step", [](TrainState& s) { s.skipped_steps = 5; }, {"skipped_steps is 5"}},
      {"scale nan", [](TrainState& s) { s.scaler.scale = std::nan(""); }, {"loss scale is nan"}},
      {"scale -2", [](TrainState& s) { s.scaler.scale = -2.0; }, {"loss scale is -2"}},
      {"scale 0", [](TrainState& s) { s.scaler.scale = 0.0; }, {"loss scale is 0"}},
      {"scale inf", [](TrainState& s) { s.scaler.scale = INFINITY; }, {"loss scale is inf"}},
      {"growth -3", [](TrainState& s) { s.scaler.growth_tracker = -3; }, {"growth_tracker is -3"}},
      {"hysteresis INT64_MIN",
       [](TrainState& s) { s.scaler.hysteresis_left = std::numeric_limits<int64_t>::min(); },
       {"hysteresis_left is"}},
      {"nan weight",
       [&](TrainState& s) { s.master_weights_fp32[weight_at] = nan; },
       {"master weight " + std::to_string(weight_at) + " (of", "is nan"}},
      {"inf momentum",
       [&](TrainState& s) { s.momentum_fp32[momentum_at] = -INFINITY; },
       {"momentum value " + std::to_string(momentum_at) + " (of", "is -inf"}},
      {"activation", [](TrainState& s) { s.activation = "tanh"; }, {"activation is 'tanh'"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    TrainState bad = good;
    c.corrupt(bad);
    const std::string path = dir + "/bad.ddpckpt";
    write_bytes(path, serialize_checkpoint(bad));
    const test::CommandResult r = run_trainer(data_args() + " --steps 8 --resume " + path);
    EXPECT_NE(r.exit_code, kHungExitCode) << c.what << ": hung on --resume";
    EXPECT_EQ(r.exit_code, 1) << c.what << ":\n" << r.output;  // a signal shows as 128 + its number
    const std::string line = error_line(r);
    EXPECT_FALSE(line.empty()) << "no single error line in:\n" << r.output;
    EXPECT_NE(line.find("bad.ddpckpt"), std::string::npos) << line;
    for (const std::string& w : c.words) EXPECT_NE(line.find(w), std::string::npos) << "'" << w << "' not in: " << line;
  }
}

TEST_F(ResumeValidation, EveryCheckpointOfARealRunValidates) {
  // Skipped steps first (momentum not yet initialised), two overflows in a
  // row with --hysteresis 1 (hysteresis_left below 0), growths every 2 clean
  // steps, short epochs with --drop-last; then a resume that goes on with
  // more overflows.
  const std::string ck = dir + "/ck";
  const std::string common =
      data_args() + " --drop-last --checkpoint-dir " + ck + " --checkpoint-every 1 --hysteresis 1 --growth-interval 2";
  const test::CommandResult first = run_trainer(common + " --steps 9 --inject-overflow 1,2,3,6,7");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const test::CommandResult second = run_trainer(common + " --steps 14 --inject-overflow 11,12,13 --resume");
  ASSERT_EQ(second.exit_code, 0) << second.output;

  int files = 0;
  bool saw_uninitialised_momentum = false, saw_negative_hysteresis = false, saw_offset = false;
  for (const auto& entry : fs::directory_iterator(ck)) {
    SCOPED_TRACE(entry.path().string());
    const TrainState s = read_checkpoint(entry.path().string());
    EXPECT_NO_THROW(validate_checkpoint_contents(s, entry.path().string()));
    ++files;
    saw_uninitialised_momentum |= s.step > 0 && !s.momentum_initialized;
    saw_negative_hysteresis |= s.scaler.hysteresis_left < 0;
    saw_offset |= s.epoch_sample_offset > 0;
  }
  EXPECT_EQ(files, 14);
  EXPECT_TRUE(saw_uninitialised_momentum);
  EXPECT_TRUE(saw_negative_hysteresis);
  EXPECT_TRUE(saw_offset);
}

}  // namespace
}  // namespace ddp
