// input_file.cpp: the bounded whole-file read (rules in input_file.h).
// Plain open/fstat/read on a descriptor: the type check must see the very
// file that is read (fstat on the open descriptor, not a second lookup of
// the path), and one read loop into one allocation is the fast path for a
// 47 MB data file.
#include "trainer/io/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace ddp {

namespace {

std::string errno_text(int err) { return std::strerror(err); }

// Why a file that is not regular is refused: its type, as `ls -l` shows it.
const char* file_type_text(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISSOCK(mode)) return "a socket";
  return "an unknown file type";
}

void require_regular(const std::string& path, const struct stat& info) {
  if (!S_ISREG(info.st_mode)) {
    throw InputFileError(path, std::string("not a regular file (") + file_type_text(info.st_mode) + ")");
  }
}

class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() { ::close(fd_); }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;

 private:
  int fd_;
};

}  // namespace

size_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_bytes = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_bytes <= 0) return kInputFileCapBytes;  // unknown: the cap alone
  return static_cast<size_t>(pages) * static_cast<size_t>(page_bytes);
}

size_t input_limit_bytes() {
  static const size_t limit = std::min(kInputFileCapBytes, physical_memory_bytes());
  return limit;
}

std::string byte_size_text(size_t bytes) {
  static const char* const kUnits[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double scaled = static_cast<double>(bytes);
  size_t unit = 0;
  while (scaled >= 1024 && unit + 1 < sizeof kUnits / sizeof kUnits[0]) {
    scaled /= 1024;
    ++unit;
  }
  if (unit == 0) return std::to_string(bytes) + " bytes";
  char text[32];
  std::snprintf(text, sizeof text, "%.1f %s", scaled, kUnits[unit]);
  return std::string(text) + " (" + std::to_string(bytes) + " bytes)";
}

std::string limit_text(size_t max_bytes) {
  std::string text = "the " + byte_size_text(max_bytes) + " limit";
  if (max_bytes == input_limit_bytes()) {
    text += max_bytes < kInputFileCapBytes ? " (the machine's physical memory)" : " (the input file cap)";
  }
  return text;
}

void require_within_limit(const std::string& path, size_t bytes_needed, size_t max_bytes, const std::string& what) {
  if (bytes_needed > max_bytes) {
    throw InputFileError(path, what + " needs " + byte_size_text(bytes_needed) + ", above " + limit_text(max_bytes));
  }
}

InputFileError out_of_memory_error(const std::string& path, const std::string& needed) {
  if (!needed.empty()) return InputFileError(path, "out of memory while loading: " + needed + " needed");
  struct stat info {};
  const std::string size = ::stat(path.c_str(), &info) == 0
                               ? "the file is " + byte_size_text(static_cast<size_t>(info.st_size)) + " on disk, and "
                               : "";
  return InputFileError(path, "out of memory while loading: " + size + "data sets are held in memory whole, as FP32");
}

std::vector<uint8_t> read_file_head(const std::string& path, size_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return {};
  FdCloser closer(fd);
  std::vector<uint8_t> head(max_bytes);
  size_t used = 0;
  while (used < max_bytes) {
    const ssize_t got = ::read(fd, head.data() + used, max_bytes - used);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return {};
    if (got == 0) break;
    used += static_cast<size_t>(got);
  }
  head.resize(used);
  return head;
}

std::vector<uint8_t> read_input_file(const std::string& path, size_t max_bytes, const std::string& what) {
  // The type first, by path, so a FIFO or a device is not even opened.
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    const int err = errno;
    throw InputFileError(path, "cannot open: " + errno_text(err));
  }
  require_regular(path, info);
  // O_NONBLOCK: should the path have become a FIFO since the stat, the open
  // returns at once instead of waiting for a writer, and the fstat below
  // refuses it. Reads of a regular file ignore the flag.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    throw InputFileError(path, "cannot open: " + errno_text(err));
  }
  FdCloser closer(fd);
  if (::fstat(fd, &info) != 0) {
    const int err = errno;
    throw InputFileError(path, "cannot stat: " + errno_text(err));
  }
  require_regular(path, info);
  const size_t size_bytes = static_cast<size_t>(info.st_size);
  if (size_bytes > max_bytes) {
    throw InputFileError(path,
                         "the " + what + " is " + byte_size_text(size_bytes) + ", above " + limit_text(max_bytes));
  }

  std::vector<uint8_t> bytes;
  try {
    bytes.resize(size_bytes);
  } catch (const std::bad_alloc&) {
    throw out_of_memory_error(path, byte_size_text(size_bytes));
  }
  size_t used = 0;
  while (used < size_bytes) {
    // At most 64 MiB per call: a read of a regular file is not interrupted by
    // a signal, so a SIGTERM during start-up is handled between calls, within
    // a fraction of a second even while a multi-GB file is read.
    const ssize_t got = ::read(fd, bytes.data() + used, std::min(size_bytes - used, size_t{64} << 20));
    if (got < 0) {
      const int err = errno;
      if (err == EINTR) continue;
      throw InputFileError(path, "cannot read: " + errno_text(err));
    }
    if (got == 0) {
      throw InputFileError(path, "the file shrank while being read: it ended after " + std::to_string(used) +
                                     " of the " + std::to_string(size_bytes) + " bytes it had when opened");
    }
    used += static_cast<size_t>(got);
  }
  // One byte more tells a file that grew since the fstat: refused, as one
  // that shrank is, rather than parsed as whatever part was there.
  uint8_t extra;
  ssize_t got;
  do {
    got = ::read(fd, &extra, 1);
  } while (got < 0 && errno == EINTR);
  if (got > 0) {
    throw InputFileError(path, "the file grew while being read (it had " + std::to_string(size_bytes) +
                                   " bytes when opened); read it when it is complete");
  }
  return bytes;
}

std::string read_text_file(const std::string& path, size_t max_bytes, const std::string& what) {
  const std::vector<uint8_t> bytes = read_input_file(path, max_bytes, what);
  return std::string(bytes.begin(), bytes.end());
}

}  // namespace ddp
