// mpi_test_main.cpp: GoogleTest main for suites run under mpiexec. Every rank
// runs every test; the failure count is all-reduced so all ranks agree on the
// verdict, and only rank 0 prints GoogleTest's report.
#include <gtest/gtest.h>
#include <mpi.h>

int main(int argc, char** argv) {
  int provided = 0;  // as MpiEnvironment: the communicator's thread needs SERIALIZED
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0, failed_anywhere = 0;
  MPI_Allreduce(&failed, &failed_anywhere, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0 && failed_anywhere) std::fprintf(stderr, "%d rank(s) failed\n", failed_anywhere);
  MPI_Finalize();
  return failed_anywhere ? 1 : 0;
}
