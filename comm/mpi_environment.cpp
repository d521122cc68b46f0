// mpi_environment.cpp: the MPI build.
#include "comm/mpi_environment.h"

#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "comm/mpi_check.h"
#include "kernels/error.h"

namespace ddp {

MpiEnvironment::MpiEnvironment(int* argc, char*** argv) {
  int initialized = 0;
  DDP_MPI_CHECK(MPI_Initialized(&initialized));
  // SERIALIZED: the communicator's thread runs the gradient all-reduces while
  // the main thread computes, and the two never call MPI at the same time.
  int provided = 0;
  if (!initialized) DDP_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided));
  // Errors come back as codes that DDP_MPI_CHECK turns into exceptions.
  DDP_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  DDP_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
  DDP_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world_size_));
  MPI_Comm local;
  DDP_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local));
  DDP_MPI_CHECK(MPI_Comm_rank(local, &local_rank_));
  DDP_MPI_CHECK(MPI_Comm_size(local, &local_size_));
  int node_first_rank = rank_;
  DDP_MPI_CHECK(MPI_Allreduce(&rank_, &node_first_rank, 1, MPI_INT, MPI_MIN, local));
  MPI_Comm_free(&local);
  const int candidate = node_block_candidate(rank_, local_rank_, local_size_, node_first_rank);
  int least = candidate, most = candidate;
  DDP_MPI_CHECK(MPI_Allreduce(&candidate, &least, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  DDP_MPI_CHECK(MPI_Allreduce(&candidate, &most, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
  node_block_size_ = least == most ? least : 0;
  char name[MPI_MAX_PROCESSOR_NAME] = {0};
  int len = 0;
  if (MPI_Get_processor_name(name, &len) == MPI_SUCCESS) host_.assign(name, len);
}

MpiEnvironment::~MpiEnvironment() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

bool MpiEnvironment::has_mpi() const { return true; }

std::vector<uint64_t> MpiEnvironment::allgather_words(const std::vector<uint64_t>& words, double timeout_s) const {
  std::vector<uint64_t> gathered(words.size() * static_cast<size_t>(world_size_));
  const int count = static_cast<int>(words.size());
  MPI_Request request;
  DDP_MPI_CHECK(MPI_Iallgather(words.data(), count, MPI_UINT64_T, gathered.data(), count, MPI_UINT64_T,
                               MPI_COMM_WORLD, &request));
  // Polled, not waited: the deadline is this rank's own (no watchdog runs yet).
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    int done = 0;
    DDP_MPI_CHECK(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
    if (done) return gathered;
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (timeout_s > 0 && waited > timeout_s)
      throw Error("start-up: the other ranks did not reach the configuration check within --collective-timeout " +
                  std::to_string(static_cast<long long>(timeout_s)) +
                  " s (a rank runs another program or a different ddp_train, or is stuck reading its input)");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void MpiEnvironment::abort_job(int exit_code) const {
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);  // MPI_Abort does not return; this is for the compiler
}

}  // namespace ddp
