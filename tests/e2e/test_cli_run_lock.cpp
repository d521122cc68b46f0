// test_cli_run_lock.cpp: one run per --checkpoint-dir. A second run started
// into the directory of a run that is training refuses in one line and
// writes nothing there; the first finishes with its own lineage intact; once
// the first is gone (ended by a signal, or killed with SIGKILL) the
// directory resumes as usual. Before the lock, both runs finished and each
// pruned the other's checkpoints.
#include <gtest/gtest.h>

#include <signal.h>

#include <filesystem>
#include <set>
#include <string>

#include "e2e/child_process.h"
#include "support/cli_test.h"

namespace ddp {
namespace {
namespace fs = std::filesystem;

class RunLockCli : public test::CliTest {
 protected:
  RunLockCli() : CliTest("run-lock") {}

  std::set<std::string> names_in(const std::string& d) const {
    std::set<std::string> out;
    for (const auto& e : fs::directory_iterator(d)) out.insert(e.path().filename().string());
    return out;
  }

  const std::string run =
      test::trainer_command() + " --data synthetic --layers 10,256,256,10 --log-every 1 --checkpoint-dir " + dir + "/ck";
};

// Two runs started at the same moment both find the directory empty: the
// first (a checkpoint at its end only) holds it while the second starts.
TEST_F(RunLockCli, ASecondRunIntoTheDirectoryOfARunningOneIsRefused) {
  test::Child first(run + " --steps 100000", dir + "/first.out");
  ASSERT_TRUE(first.wait_for_output("step 3/100000", 60)) << first.output();
  const test::CommandResult second = test::run_command(run + " --steps 5 2>&1");
  EXPECT_EQ(second.exit_code, 1) << second.output;
  const std::string line = test::single_error_line(second.output);
  EXPECT_NE(line.find("--checkpoint-dir " + dir + "/ck: another run is writing its checkpoints there now"),
            std::string::npos)
      << second.output;
  EXPECT_EQ(second.output.find("step 1/"), std::string::npos) << "trained: " << second.output;
  EXPECT_FALSE(first.poll_exit()) << "the first run ended: " << first.output();
  EXPECT_TRUE(names_in(dir + "/ck").empty()) << "the second run wrote into the first's directory";

  kill(first.pid(), SIGINT);  // a stop checkpoint, and the lock goes with the process
  const auto status = first.wait_exit(60);
  ASSERT_TRUE(status.has_value()) << first.output();
  EXPECT_EQ(test::exit_code(*status), 128 + SIGINT) << first.output();
  const test::CommandResult third = test::run_command(run + " --steps 100000 --stop-after-steps 1 --resume 2>&1");
  EXPECT_EQ(third.exit_code, 0) << third.output;
  EXPECT_NE(third.output.find("resumed from"), std::string::npos) << third.output;
}

TEST_F(RunLockCli, AKilledRunLeavesNoStaleLock) {
  test::Child first(run + " --steps 100000 --checkpoint-every 1", dir + "/first.out");
  ASSERT_TRUE(first.wait_for_output("step 2/100000", 60)) << first.output();
  kill(-first.pid(), SIGKILL);
  ASSERT_TRUE(first.wait_exit(30).has_value());
  const test::CommandResult resumed = test::run_command(run + " --steps 100000 --stop-after-steps 1 --resume 2>&1");
  EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from"), std::string::npos) << resumed.output;
}

}  // namespace
}  // namespace ddp
