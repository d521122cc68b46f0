// test_cli_safetensors.cpp: build/ddp_train with --save-weights and
// --init-weights PATH.safetensors: one file written, equal to the .npy
// export of the same run; a fine-tune start from it; and the output checks
// (never over an input, a directory or a file that is not a safetensors
// file; the directory must exist), each refusal one line, nothing trained
// and nothing touched.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "support/cli_test.h"
#include "support/test_support.h"
#include "trainer/io/safetensors.h"
#include "trainer/checkpoint/weights_io.h"
#include "trainer/models/mlp/mlp_config.h"

namespace ddp {
namespace {
namespace fs = std::filesystem;

class CliSafetensors : public test::CliTest {
 protected:
  CliSafetensors() : CliTest("cli_safetensors") {}
  void SetUp() override {
    rng.seed(test::test_seed());
    test::write_random_csv(dir + "/train.csv", 40, rng);
    test::write_random_csv(dir + "/test.csv", 12, rng);
  }

  std::string data(const std::string& layers = "4,8,3") const {
    return "--data csv --train-csv " + dir + "/train.csv --test-csv " + dir + "/test.csv --layers " + layers +
           " --batch-size 4 --log-every 1 --seed " + std::to_string(seed) + " ";
  }
  void expect_refused(const std::string& args, std::initializer_list<std::string> words) const {
    expect_refused_before_training(args, words);
  }
  std::mt19937_64 rng;
  uint64_t seed = test::test_seed() % 100000;
};

TEST_F(CliSafetensors, SaveWritesOneFileEqualToTheNpyExportOfTheSameRun) {
  const std::string file = dir + "/out.safetensors";
  const test::CommandResult a = run(data() + "--steps 3 --save-weights " + file);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  ASSERT_TRUE(fs::is_regular_file(file)) << "one file, not a directory";
  const test::CommandResult b = run(data() + "--steps 3 --save-weights " + dir + "/npy");
  ASSERT_EQ(b.exit_code, 0) << b.output;

  const ParameterRegistry registry = mlp_parameters(std::vector<int64_t>{4, 8, 3});
  const std::vector<float> from_file = load_weights(file, registry), from_npy = load_weights(dir + "/npy", registry);
  ASSERT_EQ(from_file.size(), from_npy.size());
  for (size_t k = 0; k < from_file.size(); ++k) ASSERT_EQ(test::bits_of(from_file[k]), test::bits_of(from_npy[k])) << k;
  EXPECT_EQ(read_safetensors(file).tensors.size(), registry.size());

  // Started from that file with a step that cannot move a weight, the run
  // saves what it loaded.
  const test::CommandResult c = run(data() + "--steps 1 --lr 1e-30 --momentum 0 --init-weights " + file +
                                    " --save-weights " + dir + "/again.safetensors");
  ASSERT_EQ(c.exit_code, 0) << c.output;
  EXPECT_NE(c.output.find("initial weights from " + file), std::string::npos) << c.output;
  const std::vector<float> again = load_weights(dir + "/again.safetensors", registry);
  for (size_t k = 0; k < again.size(); ++k) ASSERT_EQ(test::bits_of(again[k]), test::bits_of(from_file[k])) << k;
}

TEST_F(CliSafetensors, AnEarlierSaveIsReplacedWithANote) {
  const std::string file = dir + "/w.safetensors";
  // A static scale: no step is skipped, so the two runs' weights differ.
  ASSERT_EQ(run(data() + "--loss-scale static:64 --steps 1 --save-weights " + file).exit_code, 0);
  const std::string before = test::read_text(file);
  const test::CommandResult r = run(data() + "--loss-scale static:64 --steps 4 --save-weights " + file);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("will be replaced"), std::string::npos) << r.output;
  EXPECT_NE(test::read_text(file), before) << "four more steps change the weights";
}

TEST_F(CliSafetensors, OutputsThatAreNotOursOrCannotBeWrittenAreRefusedAndLeftIntact) {
  const std::string mine = dir + "/notes.safetensors";
  const std::string text = "my notes " + std::to_string(rng()) + "\n";
  std::ofstream(mine) << text;
  expect_refused(data() + "--steps 2 --save-weights " + mine,
                 {"--save-weights", "notes.safetensors", "not a safetensors file"});
  EXPECT_EQ(test::read_text(mine), text);

  fs::create_directory(dir + "/d.safetensors");
  expect_refused(data() + "--steps 2 --save-weights " + dir + "/d.safetensors",
                 {"--save-weights", "a directory", "not a file"});

  expect_refused(data() + "--steps 2 --save-weights " + dir + "/nodir/w.safetensors",
                 {"--save-weights", "nodir", "does not exist"});
  EXPECT_FALSE(fs::exists(dir + "/nodir")) << "one file's directory is not created";

  // The file it starts from is an input.
  const std::string init = dir + "/init.safetensors";
  ASSERT_EQ(run(data() + "--steps 1 --save-weights " + init).exit_code, 0);
  const std::string weights = test::read_text(init);
  expect_refused(data() + "--steps 2 --init-weights " + init + " --save-weights " + dir + "/./init.safetensors",
                 {"--save-weights", "input"});
  EXPECT_EQ(test::read_text(init), weights);
  expect_refused(data() + "--steps 2 --save-weights " + dir + "/m.safetensors --metrics " + dir + "/m.safetensors",
                 {"--metrics", "--save-weights"});
  EXPECT_FALSE(fs::exists(dir + "/m.safetensors"));
}

TEST_F(CliSafetensors, InitWeightsOfAnotherModelOrACorruptFileIsOneLine) {
  const std::string file = dir + "/w.safetensors";
  ASSERT_EQ(run(data() + "--steps 1 --save-weights " + file).exit_code, 0);
  // --layers 4,6,3 has 0.weight [6, 4], the file [8, 4].
  expect_refused(data("4,6,3") + "--steps 2 --init-weights " + file,
                 {"w.safetensors", "tensor 0.weight", "shape [8, 4]", "[6, 4]"});
  expect_refused(data("4,8,3,3") + "--steps 2 --init-weights " + file, {"w.safetensors", "tensor 4.weight", "missing"});
  // Cut short: the last tensor runs past the end.
  const std::string bytes = test::read_text(file);
  std::ofstream(dir + "/cut.safetensors", std::ios::binary) << bytes.substr(0, bytes.size() - 4);
  expect_refused(data() + "--steps 2 --init-weights " + dir + "/cut.safetensors", {"cut.safetensors", "past the end"});
}

}  // namespace
}  // namespace ddp
