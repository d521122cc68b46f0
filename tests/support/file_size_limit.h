// file_size_limit.h (tests): a file-size limit on this process while it
// lives (RLIMIT_FSIZE), with SIGXFSZ ignored, so a write past it fails with
// EFBIG as a full disk would fail it, instead of killing the test.
#pragma once

#include <sys/resource.h>

#include <csignal>

namespace ddp::test {

class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t max_bytes) {
    getrlimit(RLIMIT_FSIZE, &saved_);
    old_handler_ = signal(SIGXFSZ, SIG_IGN);  // write() then fails with EFBIG instead of killing us
    rlimit limited = saved_;
    limited.rlim_cur = max_bytes;
    setrlimit(RLIMIT_FSIZE, &limited);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &saved_);
    signal(SIGXFSZ, old_handler_);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  rlimit saved_{};
  sighandler_t old_handler_;
};

}  // namespace ddp::test
