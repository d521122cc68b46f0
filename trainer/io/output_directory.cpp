// output_directory.cpp
#include "trainer/io/output_directory.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "kernels/error.h"

namespace ddp {

std::string given_directory_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

void require_output_directory(const std::string& path, const std::string& flag) {
  const std::string dir = given_directory_of(path);
  const std::string named = flag + " " + path + ": its directory " + dir;
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT) throw Error(named + " does not exist");
    if (err == ENOTDIR) throw Error(named + " runs through a file, not a directory");
    if (err == ELOOP) throw Error(named + " is a loop of symbolic links");
    throw Error(named + " cannot be reached: " + std::strerror(err));
  }
  if (!S_ISDIR(st.st_mode)) throw Error(named + " is a file, not a directory");
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw Error(named + " cannot take a new file: " + std::strerror(errno));
}

}  // namespace ddp
