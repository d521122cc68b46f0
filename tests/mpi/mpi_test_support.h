// mpi_test_support.h: what every MPI suite shares. Header-only: the suites
// are one binary (tests/CMakeLists.txt globs mpi_test_*.cpp).
#pragma once

#include <mpi.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <system_error>

#include "support/test_support.h"

namespace ddp::test {

// Failures on any rank fail the test on every rank: each rank passes its own
// count and gets the sum over ranks.
inline int failures_anywhere(int local_failures) {
  int total = 0;
  MPI_Allreduce(&local_failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  return total;
}

// A directory every rank shares, made by rank 0 and removed by it once
// every rank is done with it (a barrier first: a rank still reading a
// checkpoint there would lose it). Each rank's own directory is a plain
// TempDir (support/temp_dir.h).
class SharedTempDir {
 public:
  explicit SharedTempDir(const std::string& tag) {
    char path[512] = {};
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    if (rank_ == 0) std::snprintf(path, sizeof path, "%s", make_temp_dir(tag).c_str());
    MPI_Bcast(path, sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD);
    path_ = path;
  }
  ~SharedTempDir() {
    MPI_Barrier(MPI_COMM_WORLD);
    std::error_code ignored;  // a destructor must not throw
    if (rank_ == 0) std::filesystem::remove_all(path_, ignored);
  }
  SharedTempDir(const SharedTempDir&) = delete;
  SharedTempDir& operator=(const SharedTempDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  int rank_ = 0;
  std::string path_;
};

}  // namespace ddp::test
