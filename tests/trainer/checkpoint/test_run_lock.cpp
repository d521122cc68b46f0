// test_run_lock.cpp: one run per checkpoint directory (trainer/checkpoint/
// run_lock.h): a second holder is refused at once, in one line naming the
// directory; the lock is free again when its holder goes, however it goes
// (a process killed by SIGKILL leaves no stale lock).
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "kernels/error.h"
#include "support/temp_dir.h"
#include "trainer/checkpoint/run_lock.h"

namespace ddp {
namespace {

TEST(RunLock, ASecondHolderIsRefusedUntilTheFirstIsGone) {
  const test::TempDir dir("run-lock");
  {
    const RunLock first(dir.path());
    EXPECT_TRUE(first.held());
    EXPECT_EQ(first.note(), "");
    try {
      const RunLock second(dir.path());
      ADD_FAILURE() << "a second lock on one directory was taken";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("--checkpoint-dir " + dir.path() + ": another run is writing its checkpoints there now"),
                std::string::npos)
          << what;
      EXPECT_EQ(what.find('\n'), std::string::npos);
    }
  }
  EXPECT_TRUE(RunLock(dir.path()).held()) << "released with its holder";
  EXPECT_TRUE(std::filesystem::is_empty(dir.path())) << "the lock adds no file";
}

TEST(RunLock, AKilledHolderLeavesNoStaleLock) {
  const test::TempDir dir("run-lock-killed");
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const RunLock lock(dir.path());
    const char byte = 1;
    (void)!write(ready[1], &byte, 1);
    pause();  // until SIGKILL
    _exit(0);
  }
  char byte = 0;
  ASSERT_EQ(read(ready[0], &byte, 1), 1);
  EXPECT_THROW(RunLock(dir.path()), Error) << "held by the child";
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  close(ready[0]);
  close(ready[1]);
  EXPECT_TRUE(RunLock(dir.path()).held());
}

}  // namespace
}  // namespace ddp
