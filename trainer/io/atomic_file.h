// atomic_file.h: a file replaced atomically and durably: written to
// "<path>.tmp.<pid>" in the same directory, fsynced, renamed over `path`,
// and the directory fsynced, so `path` is at every moment either the old
// complete file or the new complete one, and a crash leaves at most the
// temporary file (which checkpoint_dir.h recognises and reports). The new
// file is recorded as this program's (output_registry.h), so a later run
// may replace it without --overwrite.
#pragma once

#include <cerrno>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <unistd.h>

#include "kernels/error.h"

namespace ddp {

// What a temporary file's name has between the final name and the pid.
constexpr const char* kTempFileMarker = ".tmp.";

// A failed atomic write: what() is "cannot write <what> <path>: <problem>";
// problem() alone lets a caller with its own error type rewrap it.
class FileWriteError : public Error {
 public:
  FileWriteError(const std::string& what, const std::string& path, const std::string& problem)
      : Error("cannot write " + what + " " + path + ": " + problem), problem_(problem) {}
  const std::string& problem() const { return problem_; }

 private:
  std::string problem_;
};

// A test hook (trainer/loop/fault_hooks.h) called once, when half of the
// bytes are in the temporary file and none is synced: a crash there is a
// crash mid-write. It returns 0 to go on, or an errno value that fails the
// write there as a write(2) error would (the temporary file removed).
using MidWriteHook = std::function<int()>;

// Writes `bytes` to `path` as above. On failure the temporary file is
// removed and FileWriteError names the step and the errno text.
// `mid_write`: see MidWriteHook (empty: none, the bytes in one pass).
void write_file_atomic(const std::string& path, const std::vector<uint8_t>& bytes, const std::string& what,
                       const MidWriteHook& mid_write = {});

// Closes a file descriptor when it goes out of scope.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() {
    if (fd_ >= 0) ::close(fd_);
  }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;
  // Closes now and reports close()'s errno (0: fine): on some file systems
  // (NFS) a deferred write error surfaces only here.
  int close_now() {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc == 0 ? 0 : errno;
  }

 private:
  int fd_;
};

}  // namespace ddp
