// run_lock.h: one run per checkpoint directory. Two runs started into one
// --checkpoint-dir would otherwise both finish, each pruning the other's
// checkpoints and leaving a mixed lineage. Rank 0 holds an exclusive
// flock(2) on the directory itself for the run's life: no file is added to
// it, and the kernel releases the lock when the process ends, however it
// ends, so a killed run leaves no stale lock behind.
#pragma once

#include <string>

namespace ddp {

class RunLock {
 public:
  RunLock() = default;
  // Takes the lock on the existing directory `dir` at once, never waiting:
  // throws ddp::Error in one line naming `dir` when another process holds
  // it. A filesystem without flock on directories (some network mounts) is
  // no error: the run goes on unlocked and note() says so.
  explicit RunLock(const std::string& dir);
  ~RunLock();
  RunLock(RunLock&& other) noexcept;
  RunLock& operator=(RunLock&& other) noexcept;
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

  bool held() const { return fd_ >= 0; }
  const std::string& note() const { return note_; }

 private:
  int fd_ = -1;
  std::string note_;
};

}  // namespace ddp
