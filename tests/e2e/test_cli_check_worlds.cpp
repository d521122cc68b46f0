// test_cli_check_worlds.cpp: `ddp_train --check-worlds N[,N...]` checks the
// other flags at each world size by the trainer's own rules (the check a
// real run makes at start-up) and trains nothing: the scaling model asks it
// before it projects a configuration the trainer would refuse.
#include <gtest/gtest.h>

#include <string>

#include "support/cli_test.h"
#include "support/test_support.h"

namespace ddp {
namespace {

test::CommandResult check(const std::string& flags) {
  return test::run_command(test::trainer_command() + " --data synthetic --layers 8,16,4 " + flags + " 2>&1");
}

TEST(CliCheckWorlds, AZeroGroupThatDoesNotDivideTheWorldIsRefusedThere) {
  const test::CommandResult r = check("--zero 1 --zero-shard-size 4 --check-worlds 4,6,8");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("world 4: ok\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("world 6: refused: --zero-shard-size 4 does not divide the world of 6 ranks"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("world 8: ok\n"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("step "), std::string::npos) << "it trained:\n" << r.output;
}

TEST(CliCheckWorlds, AGlobalBatchMustDivideByRanksTimesAccumulation) {
  const test::CommandResult r = check("--global-batch 96 --grad-accum 2 --check-worlds 3,5");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("world 3: ok\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("world 5: refused: --global-batch 96 does not divide by 5 ranks x --grad-accum 2"),
            std::string::npos)
      << r.output;
  const test::CommandResult all_ok = check("--global-batch 96 --grad-accum 2 --check-worlds 1,2,3,4,6");
  EXPECT_EQ(all_ok.exit_code, 0) << all_ok.output;
}

TEST(CliCheckWorlds, FlagsWrongAtAnyWorldAndBadSizesAreOneLine) {
  const test::CommandResult bad_size = check("--check-worlds 4,0");
  EXPECT_EQ(bad_size.exit_code, 1) << bad_size.output;
  EXPECT_NE(test::single_error_line(bad_size.output).find("--check-worlds 4,0"), std::string::npos)
      << bad_size.output;
  const test::CommandResult bad_flag = check("--zero 5 --check-worlds 4");
  EXPECT_NE(bad_flag.exit_code, 0) << bad_flag.output;
  EXPECT_NE(test::single_error_line(bad_flag.output).find("--zero"), std::string::npos) << bad_flag.output;
}

}  // namespace
}  // namespace ddp
