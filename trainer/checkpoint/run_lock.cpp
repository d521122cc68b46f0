// run_lock.cpp
#include "trainer/checkpoint/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "kernels/error.h"

namespace ddp {

RunLock::RunLock(const std::string& dir) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw Error("--checkpoint-dir " + dir + ": cannot open it to lock it (" + std::strerror(errno) + ")");
  int result;
  do {
    result = flock(fd, LOCK_EX | LOCK_NB);
  } while (result != 0 && errno == EINTR);
  if (result == 0) {
    fd_ = fd;
    return;
  }
  const int error = errno;
  close(fd);
  if (error == EWOULDBLOCK)
    throw Error("--checkpoint-dir " + dir +
                ": another run is writing its checkpoints there now (it holds the directory's lock); give this run "
                "its own --checkpoint-dir, or start it when that run has ended");
  // NFS emulates flock with byte-range locks, which a directory cannot take (EBADF).
  note_ = "--checkpoint-dir " + dir + ": its filesystem cannot lock the directory (" + std::strerror(error) +
          "), so nothing stops a second run from writing there too: start one run at a time";
}

RunLock::~RunLock() {
  if (fd_ >= 0) close(fd_);  // releases the lock
}

RunLock::RunLock(RunLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)), note_(std::move(other.note_)) {}

RunLock& RunLock::operator=(RunLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    note_ = std::move(other.note_);
  }
  return *this;
}

}  // namespace ddp
