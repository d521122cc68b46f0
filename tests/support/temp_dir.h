// temp_dir.h: a test's own directory under the system temp dir, removed with
// everything in it when the guard goes out of scope. A failed ASSERT returns
// from the test body at once, past any remove_all written at its end; the
// guard's destructor still runs, so a failing test leaves nothing behind.
#pragma once

#include <filesystem>
#include <string>
#include <system_error>

#include "support/test_support.h"

namespace ddp::test {

class TempDir {
 public:
  // A new, unique directory named after `tag` (mkdtemp under the system temp dir).
  explicit TempDir(const std::string& tag) : path_(make_temp_dir(tag)) {}
  // The error_code overload: a destructor must not throw (a file the test
  // left open elsewhere, a directory made read-only by the test).
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace ddp::test
