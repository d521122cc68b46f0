// test_cli_predict.cpp: `ddp_train --predict X.npy --predictions OUT.npy`:
// the outputs of the saved weights on every row of X, against an
// independent double-precision forward pass of the same weights (FP16
// tolerance), class ids and probabilities consistent with them, the same
// file from 2 ranks as from 1, and bad input refused in one line with
// nothing written.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>

#include "support/cli_test.h"
#include "support/temp_dir.h"
#include "support/test_support.h"
#include "trainer/io/npy_io.h"

namespace ddp {
namespace {
namespace fs = std::filesystem;

constexpr size_t kRows = 51, kIn = 6, kHidden = 8, kClasses = 4;

test::CommandResult run_trainer(const std::string& args) {
  return test::run_command("timeout -k 2 120 " + test::trainer_command() + " --layers " + std::to_string(kIn) + "," +
                           std::to_string(kHidden) + "," + std::to_string(kClasses) + " " + args + " 2>&1");
}

struct Fixture {
  std::unique_ptr<test::TempDir> temp_dir;  // removed with the Fixture, even when an ASSERT ends the test
  std::string dir, data, x;
  std::vector<float> rows;
};

// Random rows and labels; a short training run that saves its weights to dir/w.
Fixture trained(const std::string& tag) {
  Fixture f;
  f.temp_dir = std::make_unique<test::TempDir>(tag);
  f.dir = f.temp_dir->path();
  std::mt19937_64 rng(test::test_seed());
  std::uniform_real_distribution<float> u(-1, 1);
  f.rows.resize(kRows * kIn);
  for (float& v : f.rows) v = u(rng);
  std::vector<int64_t> labels(kRows);
  for (int64_t& l : labels) l = static_cast<int64_t>(rng() % kClasses);
  f.x = f.dir + "/x.npy";
  save_npy_fp32(f.x, f.rows.data(), {kRows, kIn});
  save_npy_int64(f.dir + "/y.npy", labels.data(), {kRows});
  f.data = "--data npy --train-x " + f.x + " --train-y " + f.dir + "/y.npy --test-x " + f.x + " --test-y " + f.dir +
           "/y.npy --batch-size 16";
  const test::CommandResult r = run_trainer(f.data + " --steps 6 --lr 0.2 --save-weights " + f.dir + "/w");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return f;
}

TEST(CliPredict, OutputsMatchADoublePrecisionForwardOfTheSavedWeights) {
  const Fixture f = trained("predict");
  const std::string w = " --init-weights " + f.dir + "/w --batch-size 16 --predict " + f.x;
  const test::CommandResult logits = run_trainer(w + " --predict-output logits --predictions " + f.dir + "/logits.npy");
  ASSERT_EQ(logits.exit_code, 0) << logits.output;
  const std::vector<float> got = load_npy_fp32(f.dir + "/logits.npy", {kRows, kClasses});
  const std::vector<float> w0 = load_npy_fp32(f.dir + "/w/layer0.weight.npy", {kHidden, kIn});
  const std::vector<float> b0 = load_npy_fp32(f.dir + "/w/layer0.bias.npy", {kHidden});
  const std::vector<float> w1 = load_npy_fp32(f.dir + "/w/layer1.weight.npy", {kClasses, kHidden});
  const std::vector<float> b1 = load_npy_fp32(f.dir + "/w/layer1.bias.npy", {kClasses});
  double max_abs = 0;
  std::vector<double> want(kRows * kClasses);
  for (size_t r = 0; r < kRows; ++r) {
    double h[kHidden];
    for (size_t j = 0; j < kHidden; ++j) {
      double v = b0[j];
      for (size_t k = 0; k < kIn; ++k) v += double(f.rows[r * kIn + k]) * w0[j * kIn + k];
      h[j] = v > 0 ? v : 0;
    }
    for (size_t c = 0; c < kClasses; ++c) {
      double v = b1[c];
      for (size_t j = 0; j < kHidden; ++j) v += h[j] * w1[c * kHidden + j];
      want[r * kClasses + c] = v;
      max_abs = std::max(max_abs, std::fabs(v));
    }
  }
  // FP16 inputs, weights and activations (2^-11 relative each) through two layers.
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-2 * max_abs + 1e-3) << "element " << i;

  const test::CommandResult classes =
      run_trainer(w + " --predictions " + f.dir + "/class.npy");  // the default for xent
  ASSERT_EQ(classes.exit_code, 0) << classes.output;
  const test::CommandResult probs = run_trainer(w + " --predict-output probs --predictions " + f.dir + "/probs.npy");
  ASSERT_EQ(probs.exit_code, 0) << probs.output;
  const NpyArray ids = read_npy(f.dir + "/class.npy");
  ASSERT_EQ(ids.shape, std::vector<size_t>{kRows});
  const std::vector<int64_t> id = npy_values_as_int(ids);
  const std::vector<float> p = load_npy_fp32(f.dir + "/probs.npy", {kRows, kClasses});
  for (size_t r = 0; r < kRows; ++r) {
    const float* row = got.data() + r * kClasses;
    EXPECT_EQ(id[r], std::max_element(row, row + kClasses) - row) << "row " << r;  // torch.argmax of the logits
    double sum = 0;
    for (size_t c = 0; c < kClasses; ++c) sum += p[r * kClasses + c];
    EXPECT_NEAR(sum, 1.0, 1e-5) << "row " << r;
    const float* pr = p.data() + r * kClasses;
    EXPECT_EQ(std::max_element(pr, pr + kClasses) - pr, id[r]) << "row " << r;
  }
#if defined(DDP_MPIEXEC)
  // 51 rows over 2 ranks (25 + 26): gathered in order, the same bytes.
  const test::CommandResult two =
      test::run_command("timeout -k 2 120 " + test::mpiexec_prefix(2) + test::trainer_command() + " --layers " +
                        std::to_string(kIn) + "," + std::to_string(kHidden) + "," + std::to_string(kClasses) + w +
                        " --predict-output logits --predictions " + f.dir + "/logits2.npy 2>&1");
  ASSERT_EQ(two.exit_code, 0) << two.output;
  EXPECT_EQ(test::read_text(f.dir + "/logits2.npy"), test::read_text(f.dir + "/logits.npy"));
#endif
}

TEST(CliPredict, BadInputIsRefusedInOneLineAndNothingIsWritten) {
  const Fixture f = trained("predict-bad");
  std::vector<float> narrow(3 * (kIn - 1), 0.5f);
  save_npy_fp32(f.dir + "/narrow.npy", narrow.data(), {3, kIn - 1});
  std::ofstream(f.dir + "/notes.txt") << "mine\n";
  const std::string w = " --init-weights " + f.dir + "/w";
  const struct {
    std::string args, words;
  } cases[] = {
      {w + " --predict " + f.x, "--predict and --predictions go together"},
      {" --predict " + f.x + " --predictions " + f.dir + "/o.npy", "--predict needs --resume or --init-weights"},
      {w + " --predict " + f.x + " --predictions " + f.dir + "/o.npy --metrics " + f.dir + "/m.jsonl",
       "--metrics has no meaning with --predict"},
      {w + " --predict " + f.dir + "/narrow.npy --predictions " + f.dir + "/o.npy", "rows of 6 features"},
      {w + " --predict " + f.x + " --predictions " + f.x, "is one of this run's inputs"},
      {w + " --predict " + f.x + " --predictions " + f.dir + "/notes.txt", "is not a file ddp_train wrote"},
      // A user's array (a copy of one: a .npy, but not what ddp_train wrote) is not replaced either.
      {w + " --predict " + f.x + " --predictions " + f.dir + "/users.npy", "users.npy: exists and is not a file"},
      {w + " --predict " + f.x + " --predictions " + f.dir + "/nodir/o.npy", "does not exist"},
      {w + " --predict " + f.x + " --predictions " + f.dir + "/o.npy --predict-output odds", "not one of logits"},
      {w + " --predict-output probs", "--predict-output needs --predict"},
      // A file of the --init-weights directory is an input too (it was written over).
      {w + " --predict " + f.x + " --predictions " + f.dir + "/w/layer0.weight.npy", "is one of this run's inputs"},
      // Integer rows other than uint8 are labels, not features: named, not an internal message.
      {w + " --predict " + f.dir + "/ints.npy --predictions " + f.dir + "/o.npy", "ints.npy: "},
      // A NaN row predicts nothing: named as a training file's would be (it was predicted).
      {w + " --predict " + f.dir + "/nan.npy --predictions " + f.dir + "/o.npy",
       "nan.npy: non-finite value (nan) in sample 1, feature 2"},
  };
  const std::vector<int64_t> ints(3 * kIn, 1);
  save_npy_int64(f.dir + "/ints.npy", ints.data(), {3, kIn});
  std::vector<float> with_nan(3 * kIn, 0.25f);
  with_nan[kIn + 2] = std::nanf("");
  save_npy_fp32(f.dir + "/nan.npy", with_nan.data(), {3, kIn});
  fs::copy_file(f.x, f.dir + "/users.npy");
  const std::string x_before = test::read_text(f.x);
  const std::string weights_before = test::read_text(f.dir + "/w/layer0.weight.npy");
  for (const auto& c : cases) {
    const test::CommandResult r = run_trainer(c.args);
    EXPECT_NE(r.exit_code, 0) << c.args;
    EXPECT_NE(test::single_error_line(r.output).find(c.words), std::string::npos) << c.args << "\n" << r.output;
  }
  EXPECT_FALSE(fs::exists(f.dir + "/o.npy"));
  EXPECT_FALSE(fs::exists(f.dir + "/m.jsonl"));
  EXPECT_EQ(test::read_text(f.dir + "/notes.txt"), "mine\n");
  EXPECT_EQ(test::read_text(f.dir + "/users.npy"), x_before);
  EXPECT_EQ(test::read_text(f.x), x_before);
  // With --overwrite the user's file is replaced, and said so.
  const test::CommandResult overwrite = run_trainer(w + " --predict " + f.x + " --predictions " + f.dir +
                                                   "/users.npy --overwrite");
  EXPECT_EQ(overwrite.exit_code, 0) << overwrite.output;
  EXPECT_NE(overwrite.output.find("users.npy: replacing it (--overwrite)"), std::string::npos) << overwrite.output;
  EXPECT_EQ(test::read_text(f.dir + "/w/layer0.weight.npy"), weights_before);
}

}  // namespace
}  // namespace ddp
