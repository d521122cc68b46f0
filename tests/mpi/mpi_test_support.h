// mpi_test_support.h: what every MPI suite shares. Header-only: the suites
// are one binary (tests/CMakeLists.txt globs mpi_test_*.cpp).
#pragma once

#include <mpi.h>

namespace ddp::test {

// Failures on any rank fail the test on every rank: each rank passes its own
// count and gets the sum over ranks.
inline int failures_anywhere(int local_failures) {
  int total = 0;
  MPI_Allreduce(&local_failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  return total;
}

}  // namespace ddp::test
