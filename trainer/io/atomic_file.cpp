// atomic_file.cpp
#include "trainer/io/atomic_file.h"

#include <fcntl.h>

#include <cstring>

#include "kernels/error.h"
#include "trainer/io/output_directory.h"
#include "trainer/io/output_registry.h"

namespace ddp {
namespace {

std::string errno_text(int err) { return std::strerror(err); }

// The rename is durable only once the directory entry is on disk.
void fsync_directory(const std::string& dir, const std::string& path, const std::string& what) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    throw FileWriteError(what, path, "opening directory " + dir + " to sync it: " + errno_text(err));
  }
  FdCloser closer(fd);
  // Some file systems cannot sync a directory and say EINVAL; there is
  // nothing more we can do for durability there, and the file is complete.
  if (::fsync(fd) != 0 && errno != EINVAL) {
    const int err = errno;
    throw FileWriteError(what, path, "syncing directory " + dir + ": " + errno_text(err));
  }
}

}  // namespace

void write_file_atomic(const std::string& path, const std::vector<uint8_t>& bytes, const std::string& what,
                       const MidWriteHook& mid_write) {
  const std::string temp_path = path + kTempFileMarker + std::to_string(::getpid());
  const int fd = ::open(temp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) {
    const int err = errno;
    throw FileWriteError(what, path, "creating " + temp_path + ": " + errno_text(err));
  }
  FdCloser closer(fd);
  // From here on the temporary file is ours; every failure removes it. The
  // caller captures errno first: building the message may allocate.
  auto fail = [&](const std::string& step, int err) {
    closer.close_now();
    ::unlink(temp_path.c_str());
    throw FileWriteError(what, path, step + ": " + errno_text(err));
  };

  // Plain write(2) on a descriptor: there is no user-space buffer to flush,
  // so fsync alone makes the data durable before the rename publishes it.
  // With a hook, the bytes go in two halves and the hook runs between them.
  size_t written = 0;
  auto write_until = [&](size_t end) {
    while (written < end) {
      const ssize_t n = ::write(fd, bytes.data() + written, end - written);
      if (n < 0) {
        const int err = errno;
        if (err == EINTR) continue;
        fail("writing " + temp_path, err);
      }
      written += static_cast<size_t>(n);
    }
  };
  if (mid_write) {
    write_until(bytes.size() / 2);
    if (const int err = mid_write(); err != 0) fail("writing " + temp_path, err);
  }
  write_until(bytes.size());
  if (::fsync(fd) != 0) {
    const int err = errno;
    fail("syncing " + temp_path, err);
  }
  if (const int err = closer.close_now(); err != 0) {
    ::unlink(temp_path.c_str());
    throw FileWriteError(what, path, "closing " + temp_path + ": " + errno_text(err));
  }
  if (::rename(temp_path.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp_path.c_str());
    throw FileWriteError(what, path, "renaming " + temp_path + ": " + errno_text(err));
  }
  fsync_directory(given_directory_of(path), path, what);
  record_output(path, program_name() + " (" + what + ")");
}

}  // namespace ddp
