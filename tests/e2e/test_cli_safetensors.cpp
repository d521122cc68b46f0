// test_cli_safetensors.cpp: build/ddp_train with --save-weights and
// --init-weights PATH.safetensors: one file written, equal to the .npy
// export of the same run; in FP16 and BF16 (--save-weights-dtype); a
// fine-tune start from it; and the output checks
// (never over an input, a directory or a file that is not a safetensors
// file; the directory must exist), each refusal one line, nothing trained
// and nothing touched.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "kernels/bfloat16.h"
#include "kernels/half.h"
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

// --save-weights-dtype: the same run saved in BF16 and FP16 holds its FP32
// export's values rounded once (the kernels' tested conversions), which
// --init-weights reads back; an FP16 export of a weight beyond 65504 is
// written FP32 instead, saying so; the flag's misuses are one line each.
TEST_F(CliSafetensors, SaveWeightsDtypeRoundsTheFp32ExportOnceOrFallsBackSayingSo) {
  ASSERT_EQ(run(data() + "--steps 3 --save-weights " + dir + "/f32.safetensors").exit_code, 0);
  const ParameterRegistry registry = mlp_parameters(std::vector<int64_t>{4, 8, 3});
  const std::vector<float> f32 = load_weights(dir + "/f32.safetensors", registry);
  for (const char* dtype : {"bf16", "fp16"}) {
    const std::string file = dir + "/" + dtype + ".safetensors";
    const test::CommandResult r = run(data() + "--steps 3 --save-weights " + file + " --save-weights-dtype " + dtype);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const std::vector<float> got = load_weights(file, registry);
    const bool bf16 = std::string(dtype) == "bf16";
    for (size_t k = 0; k < got.size(); ++k) {
      const float want = bf16 ? bfloat16_to_float(to_bfloat16(f32[k])) : half_to_float(to_half(f32[k]));
      ASSERT_EQ(test::bits_of(got[k]), test::bits_of(want)) << dtype << " element " << k;
    }
    EXPECT_EQ(read_safetensors(file).tensors[0].dtype, bf16 ? SafetensorsDtype::BF16 : SafetensorsDtype::F16);
  }
  // A start whose weights hold 70000, kept by a step that cannot move them
  // (in BF16: an FP16 run refuses weights beyond 65504 at load).
  std::vector<float> big = f32;
  big[registry.tensors()[0].offset] = 70000.0f;
  save_weights(dir + "/big.safetensors", registry, big);
  const test::CommandResult r =
      run(data() + "--steps 1 --lr 1e-30 --momentum 0 --precision bf16 --init-weights " + dir +
          "/big.safetensors --save-weights " + dir + "/out16.safetensors --save-weights-dtype fp16");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("beyond FP16's 65504: the weights are written in fp32 instead"), std::string::npos)
      << r.output;
  EXPECT_EQ(read_safetensors(dir + "/out16.safetensors").tensors[0].dtype, SafetensorsDtype::F32);
  expect_refused(data() + "--steps 1 --save-weights-dtype bf16", {"--save-weights-dtype bf16 needs --save-weights"});
  expect_refused(data() + "--steps 1 --save-weights " + dir + "/npydir --save-weights-dtype fp16",
                 {"--save-weights-dtype fp16", "fp32 only"});
  expect_refused(data() + "--steps 1 --save-weights " + dir + "/x.safetensors --save-weights-dtype half",
                 {"--save-weights-dtype", "'half' is not one of fp32, fp16, bf16"});
}

TEST_F(CliSafetensors, AnEarlierSaveIsReplacedWithANote) {
  const std::string file = dir + "/w.safetensors";
  // A static scale: no step is skipped, so the two runs' weights differ.
  ASSERT_EQ(run(data() + "--loss-scale static:64 --steps 1 --save-weights " + file).exit_code, 0);
  const std::string before = test::read_text(file);
  const test::CommandResult r = run(data() + "--loss-scale static:64 --steps 4 --save-weights " + file);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(file + ": replacing it (written by ddp_train"), std::string::npos) << r.output;
  EXPECT_NE(test::read_text(file), before) << "four more steps change the weights";
}

TEST_F(CliSafetensors, OutputsThatAreNotOursOrCannotBeWrittenAreRefusedAndLeftIntact) {
  const std::string mine = dir + "/notes.safetensors";
  const std::string text = "my notes " + std::to_string(rng()) + "\n";
  std::ofstream(mine) << text;
  expect_refused(data() + "--steps 2 --save-weights " + mine,
                 {"--save-weights", "notes.safetensors", "not a file ddp_train wrote", "--overwrite"});
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
