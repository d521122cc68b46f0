// test_cli_precision.cpp: --precision as a user runs it. A GPT trained in
// bf16 logs every step's loss close to the fp16 run's from the same
// weights and data, without loss scaling, and says BF16 in its device and
// memory lines; --loss-scale dynamic with bf16 scales and says so; a
// checkpoint of one precision resumes in the other with the same FP32
// masters, bit for bit; a bad precision is refused in one line; --help
// says what bf16 implies.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "support/cli_test.h"
#include "support/test_support.h"
#include "trainer/io/npy_io.h"

namespace ddp {
namespace {

class CliPrecision : public test::CliTest {
 protected:
  CliPrecision() : CliTest("cli_precision") {}
  void SetUp() override {
    std::mt19937_64 rng(test::test_seed());
    std::string s(6000, ' ');
    for (char& ch : s) ch = static_cast<char>('a' + rng() % 16);
    text = dir + "/input.txt";
    std::ofstream(text, std::ios::binary) << s;
  }

  std::string gpt_args() const {
    return "--model gpt --data text --train-text " + text +
           " --n-layer 2 --n-head 2 --n-embd 32 --block-size 32 --batch-size 8 --steps 12 --optimizer adamw "
           "--lr 3e-3 --lr-schedule constant --log-every 1 --seed 5";
  }
  std::string mlp_args() const {
    return "--data synthetic --layers 10,32,10 --loss mse --global-batch 16 --log-every 1 --seed 9";
  }

  std::string text;
};

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// BF16 keeps 8 bits of mantissa: the same step's loss differs from FP16's
// by the rounding of weights, activations and gradients (2^-9 relative
// each, 8x FP16's) carried through 12 AdamW steps. 1% of a loss of about
// ln 16 is some 10 of BF16's ulps at the logits: above what those
// roundings moved it over seeds (0.06% seen), far below a wrong format (a
// BF16 buffer read as FP16 is off by orders of magnitude).
TEST_F(CliPrecision, Bf16TrainsTheGptCloseToFp16WithoutLossScaling) {
  std::vector<double> losses[2];
  std::string outputs[2];
  for (const int bf16 : {0, 1}) {
    const std::string metrics = dir + "/m" + std::to_string(bf16) + ".jsonl";
    const test::CommandResult r =
        run(gpt_args() + " --precision " + (bf16 ? "bf16" : "fp16") + " --metrics " + metrics, 120);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    losses[bf16] = test::metrics_losses(metrics);
    outputs[bf16] = r.output;
  }
  ASSERT_GE(losses[0].size(), 13u) << "twelve steps and the summary";
  ASSERT_EQ(losses[1].size(), losses[0].size());
  double worst = 0.0;
  for (size_t i = 0; i < losses[0].size(); ++i) {
    EXPECT_NEAR(losses[1][i], losses[0][i], 1e-2 * losses[0][i]) << "loss " << i;
    worst = std::max(worst, std::fabs(losses[1][i] - losses[0][i]) / losses[0][i]);
  }
  std::printf("bf16 against fp16, 12 GPT steps: worst relative loss difference %.3g\n", worst);
  EXPECT_LT(losses[1][11], losses[1][0]) << "bf16 did not learn";
  EXPECT_NE(outputs[1].find("BF16 weights"), std::string::npos) << outputs[1];
  EXPECT_NE(outputs[1].find(", bf16)"), std::string::npos) << "device line: " << outputs[1];
  EXPECT_NE(outputs[1].find("final loss scale 1\n"), std::string::npos) << "bf16 scaled the loss: " << outputs[1];
  EXPECT_NE(outputs[0].find("FP16 weights"), std::string::npos) << outputs[0];
  EXPECT_NE(outputs[0].find("final loss scale 65536"), std::string::npos) << outputs[0];
}

TEST_F(CliPrecision, DynamicScalingWithBf16ScalesAndIsSaid) {
  const test::CommandResult r = run(mlp_args() + " --steps 3 --precision bf16 --loss-scale dynamic");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--precision bf16 with --loss-scale dynamic"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("final loss scale 65536"), std::string::npos) << r.output;
  const test::CommandResult plain = run(mlp_args() + " --steps 3");
  EXPECT_EQ(plain.output.find("--loss-scale dynamic"), std::string::npos) << "said without bf16: " << plain.output;
}

// The masters are FP32 in both precisions: resuming restores them as they
// were, and only the working copy's rounding differs. Resumed at its last
// step (nothing left to train), a run's exported masters are the bytes of
// the run that wrote the checkpoint, in either direction. The checkpoint
// records its precision, so a dynamic loss scale does not continue from a
// bf16 run's 1.
TEST_F(CliPrecision, ACheckpointResumesInTheOtherPrecisionWithTheSameMasters) {
  for (const std::string from : {"fp16", "bf16"}) {
    const std::string to = from == "fp16" ? "bf16" : "fp16", ck = dir + "/ck_" + from;
    const std::string written = dir + "/written_" + from + ".safetensors";
    const std::string resumed = dir + "/resumed_" + from + ".safetensors";
    const test::CommandResult a = run(mlp_args() + " --steps 6 --stop-after-steps 3 --precision " + from +
                                      " --checkpoint-dir " + ck + " --save-weights " + written);
    ASSERT_EQ(a.exit_code, 0) << a.output;
    const test::CommandResult b = run(mlp_args() + " --steps 3 --resume --precision " + to + " --checkpoint-dir " + ck +
                                      " --save-weights " + resumed);
    ASSERT_EQ(b.exit_code, 0) << b.output;
    EXPECT_NE(b.output.find("done: 0 steps"), std::string::npos) << b.output;
    const std::string want = file_bytes(written);
    ASSERT_FALSE(want.empty());
    EXPECT_TRUE(file_bytes(resumed) == want) << from << " -> " << to << ": the masters changed";
    // And it trains on from there in the other precision: fp16 with a fresh
    // dynamic scale (a bf16 run's scale is 1, no FP16 scale), said; bf16
    // without scaling.
    const test::CommandResult c = run(mlp_args() + " --steps 6 --resume --precision " + to + " --checkpoint-dir " + ck);
    ASSERT_EQ(c.exit_code, 0) << c.output;
    EXPECT_NE(c.output.find("done: 3 steps"), std::string::npos) << c.output;
    if (to == "fp16") {
      EXPECT_NE(c.output.find("the checkpoint trained in bf16, this run in fp16: the dynamic loss scale starts at "
                              "--init-scale 65536"),
                std::string::npos)
          << c.output;
      EXPECT_NE(c.output.find("final loss scale 65536"), std::string::npos) << c.output;
    } else {
      EXPECT_NE(c.output.find("final loss scale 1\n"), std::string::npos) << c.output;
    }
  }
}

// A weight of 1e5 (above FP16's 65504) loaded into an FP16 run would make
// its working copy Inf and every loss NaN: refused with the tensor named,
// and --precision bf16 offered, which takes it. Before the check it trained
// on NaN.
TEST_F(CliPrecision, WeightsBeyondFp16AreRefusedInFp16AndTakenInBf16) {
  const std::string w = dir + "/w";
  ASSERT_EQ(run(mlp_args() + " --steps 1 --save-weights " + w).exit_code, 0);
  std::string npy;
  for (const auto& e : std::filesystem::directory_iterator(w))
    if (npy.empty() || e.path().string() < npy) npy = e.path().string();
  const NpyArray array = read_npy(npy);
  std::vector<float> values(array.count());
  std::memcpy(values.data(), array.data.data(), values.size() * sizeof(float));
  values[test::test_seed() % values.size()] = -1e5f;
  save_npy_fp32(npy, values.data(), array.shape);
  expect_refused_before_training(mlp_args() + " --steps 1 --init-weights " + w,
                                 {"--init-weights " + w + ": tensor", "holds -100000", "beyond FP16's largest value",
                                  "--precision bf16"});
  const test::CommandResult bf16 = run(mlp_args() + " --steps 1 --init-weights " + w + " --precision bf16");
  EXPECT_EQ(bf16.exit_code, 0) << bf16.output;
}

TEST_F(CliPrecision, ABadPrecisionIsRefusedInOneLine) {
  expect_refused_before_training(mlp_args() + " --steps 3 --precision fp8", {"--precision fp8", "fp16", "bf16"});
  // An empty --loss-scale is not the precision's default, whichever it is.
  expect_refused_before_training(mlp_args() + " --steps 3 --precision bf16 --loss-scale ''", {"--loss-scale"});
}

// --grad-reduce-dtype fp32 at 2 ranks: said at start-up, named in --bench's
// record, and its sums counted at 4 bytes an element (the gathers at 2):
// 64*96+96+96*10+10 = 7,210 parameters, (N-1)/N = 1/2, an all-reduce
// sending each element twice, a reduce-scatter once and the gather once.
TEST_F(CliPrecision, GradReduceDtypeFp32IsSaidAndItsSumsCountFourBytes) {
#if !defined(DDP_MPIEXEC)
  GTEST_SKIP() << "built without MPI";
#else
  for (const int stage : {0, 1}) {
    const test::CommandResult r =
        test::run_command(test::mpiexec_prefix(2) + DDP_TRAIN_BINARY +
                          " --device cpu --threads 1 --bench --layers 64,96,10 --batch-size 8 --bench-warmup 1 "
                          "--bench-steps 2 --precision bf16 --grad-reduce-dtype fp32 --zero " +
                          std::to_string(stage) + " 2>&1");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("--grad-reduce-dtype fp32: the gradients are widened and summed over the 2 ranks in FP32"),
              std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find("\"grad_reduce_dtype\":\"fp32\""), std::string::npos) << r.output;
    const double theory = stage == 0 ? 4.0 * 0.5 * 2 * 7210 : 4.0 * 0.5 * 7210 + 2.0 * 0.5 * 7210;
    EXPECT_EQ(test::json_value(r.output, "comm_bytes_theory"), theory) << r.output;
  }
#endif
}

TEST_F(CliPrecision, ABadGradReduceDtypeIsRefusedInOneLine) {
  // Not the working precision (FP16 gradients are not summed in BF16), not a format, not empty.
  expect_refused_before_training(mlp_args() + " --steps 3 --grad-reduce-dtype bf16",
                                 {"--grad-reduce-dtype bf16", "fp32", "fp16"});
  expect_refused_before_training(mlp_args() + " --steps 3 --precision bf16 --grad-reduce-dtype fp16",
                                 {"--grad-reduce-dtype fp16", "fp32", "bf16"});
  expect_refused_before_training(mlp_args() + " --steps 3 --grad-reduce-dtype ''", {"--grad-reduce-dtype ''"});
  // The working precision's own name is its default.
  const test::CommandResult same = run(mlp_args() + " --steps 2 --precision bf16 --grad-reduce-dtype bf16");
  EXPECT_EQ(same.exit_code, 0) << same.output;
}

TEST_F(CliPrecision, HelpSaysWhatBf16Implies) {
  const test::CommandResult r = run("--help");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--precision"), std::string::npos);
  EXPECT_NE(r.output.find("none (bf16)"), std::string::npos) << "--loss-scale's default per precision";
  EXPECT_NE(r.output.find("torch.bfloat16"), std::string::npos);
}

}  // namespace
}  // namespace ddp
