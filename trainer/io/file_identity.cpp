// file_identity.cpp
#include "trainer/io/file_identity.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

namespace ddp {
namespace {

std::string hex32(unsigned long value) {
  char text[16];
  std::snprintf(text, sizeof text, "%08lx", value);
  return text;
}

// CRC-32 of [offset, offset + bytes) of `fd` into `crc`; false on a read error.
bool crc_range(int fd, off_t offset, size_t bytes, std::vector<unsigned char>& chunk, uLong& crc) {
  while (bytes > 0) {
    const size_t want = std::min(bytes, chunk.size());
    const ssize_t got = pread(fd, chunk.data(), want, offset);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;  // a file cut short while read differs from its copies anyway
    crc = crc32(crc, chunk.data(), static_cast<uInt>(got));
    offset += got;
    bytes -= static_cast<size_t>(got);
  }
  return true;
}

std::string regular_file_identity(const std::string& path, size_t size) {
  // O_NONBLOCK: the type was checked, but a path swapped for a FIFO since must not block.
  const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return "unreadable: " + std::string(std::strerror(errno));
  std::vector<unsigned char> chunk(kIdentityBlockBytes);
  uLong crc = crc32(0L, Z_NULL, 0);
  bool ok = true;
  const bool sampled = size > kIdentityWholeFileBytes;
  if (!sampled) {
    ok = crc_range(fd, 0, size, chunk, crc);
  } else {
    const size_t last_start = size - kIdentityBlockBytes;
    for (size_t i = 0; i < kIdentitySampleCount && ok; ++i) {
      const size_t start = last_start / (kIdentitySampleCount - 1) * i;
      ok = crc_range(fd, static_cast<off_t>(i + 1 == kIdentitySampleCount ? last_start : start), kIdentityBlockBytes,
                     chunk, crc);
    }
  }
  close(fd);
  if (!ok) return "unreadable: a read failed";
  return "file, " + std::to_string(size) + " bytes, crc32 " + hex32(crc) + (sampled ? ", sampled" : "");
}

// `content`: each file's identity; else its size only.
std::string directory_identity(const std::string& path, bool content) {
  DIR* dir = opendir(path.c_str());
  if (dir == nullptr) return "unreadable: " + std::string(std::strerror(errno));
  std::vector<std::string> names;
  while (const dirent* entry = readdir(dir)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  closedir(dir);
  std::sort(names.begin(), names.end());
  std::string out = content ? "directory:" : "listing:";
  for (const std::string& name : names) {
    struct stat st;
    const std::string full = path + "/" + name;
    // Only the files a reader could take from it; subdirectories are not read.
    if (stat(full.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    const auto size = static_cast<size_t>(st.st_size);
    out += " " + name + " (" + (content ? regular_file_identity(full, size) : std::to_string(size) + " bytes") + ");";
  }
  return out;
}

std::string path_identity(const std::string& path, bool content) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return errno == ENOENT ? "missing" : "unreadable: " + std::string(std::strerror(errno));
  if (S_ISDIR(st.st_mode)) return directory_identity(path, content);
  if (!S_ISREG(st.st_mode)) return "not a regular file";
  return regular_file_identity(path, static_cast<size_t>(st.st_size));
}

}  // namespace

std::string file_identity(const std::string& path) { return path_identity(path, true); }

std::string listing_identity(const std::string& path) { return path_identity(path, false); }

}  // namespace ddp
