// test_cli_rank_agreement.cpp: ranks started with different flags or data
// (`mpiexec -n 1 ddp_train A : -n 1 ddp_train B`, as a hostfile's nodes with
// other config files or data are) stop at start-up, every rank together, with
// one line naming the setting and the ranks that differ, before any
// collective depends on it. Before the check: a segfault or a double free
// (other model shapes), NaN (FP16 words summed with BF16 words), a hang past
// --collective-timeout (other ZeRO stages), or silently wrong training
// (other learning rates, seeds, data). Skipped in a build without MPI.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <string>
#include <utility>

#include "support/cli_test.h"
#include "support/temp_dir.h"
#include "support/test_support.h"

namespace ddp {
namespace {

#if defined(DDP_MPIEXEC)
class RankAgreement : public test::CliTest {
 protected:
  RankAgreement() : CliTest("rank-agreement") {
    const uint64_t seed = test::test_seed();
    std::mt19937_64 rng(seed);
    for (const char* name : {"/train.csv", "/copy.csv", "/other.csv"}) {
      std::ofstream out(dir + name);
      out << "a,b,label\n";
      for (int i = 0; i < 32; ++i) out << rng() % 100 / 50.0 - 1 << "," << rng() % 7 << "," << rng() % 3 << "\n";
    }
    std::ifstream in(dir + "/train.csv");
    std::ofstream(dir + "/copy.csv") << in.rdbuf();
  }

  // Rank 0 with `a`, rank 1 with `b`, each on the CSV data with the
  // defaults below for the flags it does not give itself.
  test::CommandResult run_two(const std::string& a, const std::string& b, int timeout_s = 60) const {
    const auto side = [&](const std::string& flags) {
      std::string out = std::string(DDP_TRAIN_BINARY) + " --device cpu --data csv --train-csv " + dir +
                        "/train.csv --batch-size 4 --log-every 1 " + flags;
      const std::pair<const char*, std::string> defaults[] = {{"--threads", "1"},
                                                              {"--steps", "2"},
                                                              {"--layers", "2,8,3"},
                                                              {"--test-csv", dir + "/train.csv"}};
      for (const auto& [flag, value] : defaults)
        if (flags.find(std::string(flag) + " ") == std::string::npos) out += std::string(" ") + flag + " " + value;
      return out;
    };
    const std::string prefix = test::mpiexec_prefix(1);  // "... -n 1 --oversubscribe "
    return test::run_command("timeout -k 2 " + std::to_string(timeout_s) + " " + prefix + side(a) + " : -n 1 " +
                             side(b) + " 2>&1");
  }

  void expect_disagreement(const std::string& a, const std::string& b, const std::string& words) const {
    SCOPED_TRACE(a + " | " + b);
    const test::CommandResult r = run_two(a, b);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    const std::string line = test::single_error_line(r.output);
    EXPECT_NE(line.find("the ranks disagree on " + words + ": rank 1 differs from rank 0's"), std::string::npos)
        << r.output;
    EXPECT_EQ(r.output.find("step 1/"), std::string::npos) << "trained first: " << r.output;
    EXPECT_EQ(r.output.find("MPI_ABORT"), std::string::npos) << "every rank stops by itself: " << r.output;
  }
};

TEST_F(RankAgreement, OtherValuesOfTheFlagsThatShapeTheRunAreNamed) {
  expect_disagreement("--lr 0.1", "--lr 0.2", "--lr");
  expect_disagreement("", "--layers 2,16,3", "--layers");           // was a segfault or a double free
  expect_disagreement("", "--precision bf16", "--precision");       // was FP16 and BF16 words summed into NaN
  expect_disagreement("--zero 1", "--zero 2", "--zero");             // was a hang past --collective-timeout
  expect_disagreement("--steps 3", "--steps 2", "--steps");         // was a timeout's "a peer may have stalled"
}

TEST_F(RankAgreement, AnotherDataFileIsNamedAndACopyAtAnotherPathIsNot) {
  expect_disagreement("", "--test-csv " + dir + "/other.csv", "--test-csv (what it holds)");
  const test::CommandResult r = run_two("--threads 1", "--test-csv " + dir + "/copy.csv --threads 2");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("step 2/2"), std::string::npos) << r.output;
}

TEST_F(RankAgreement, ARankThatNeverComesEndsTheJobAtTheTimeout) {
  // Rank 1 prints --help and finalizes: it never reaches the check.
  const test::CommandResult r = run_two("--collective-timeout 2", "--help", 60);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.exit_code, 124) << "hung: " << r.output;
  EXPECT_NE(r.output.find("did not reach the configuration check within --collective-timeout 2 s"), std::string::npos)
      << r.output;
}
#endif

}  // namespace
}  // namespace ddp
