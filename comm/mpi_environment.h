// mpi_environment.h: the process's place in the job. With MPI: init and
// finalize, world rank/size, local rank and local size from
// MPI_Comm_split_type(MPI_COMM_TYPE_SHARED), host name. Without mpirun the
// program is a world of one (Open MPI singleton init needs no daemon); a build
// without MPI (DDP_MPI=OFF) is always a world of one.
#pragma once

#include <string>

namespace ddp {

class MpiEnvironment {
 public:
  MpiEnvironment(int* argc, char*** argv);
  ~MpiEnvironment();
  MpiEnvironment(const MpiEnvironment&) = delete;
  MpiEnvironment& operator=(const MpiEnvironment&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  const std::string& host() const { return host_; }
  bool has_mpi() const;

  // Ends every rank of the job (MPI_Abort), so no peer waits in a collective.
  [[noreturn]] void abort_job(int exit_code) const;

 private:
  int rank_ = 0, world_size_ = 1, local_rank_ = 0, local_size_ = 1;
  std::string host_;
};

}  // namespace ddp
