// mpi_environment.h: the process's place in the job. With MPI: init and
// finalize, world rank/size, local rank and local size from
// MPI_Comm_split_type(MPI_COMM_TYPE_SHARED), whether the nodes hold equal
// blocks of consecutive ranks (hybrid sharding's default groups), host name. Without mpirun the
// program is a world of one (Open MPI singleton init needs no daemon); a build
// without MPI (DDP_MPI=OFF) is always a world of one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ddp {

// One rank's view of whether its node is a block of consecutive ranks that
// starts at a multiple of the node's size: the node's size when it is (the
// node's ranks are [node_first_rank, node_first_rank + local_size), since
// local ranks follow world ranks), else 0. The job's node block size is the
// value when every rank reports the same one.
inline int node_block_candidate(int rank, int local_rank, int local_size, int node_first_rank) {
  const bool block = local_size > 0 && rank - local_rank == node_first_rank && node_first_rank % local_size == 0;
  return block ? local_size : 0;
}

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
  // The ranks of each node when every node holds that many consecutive
  // ranks, starting at a multiple of it (mpirun's default --map-by slot on
  // equal hosts, Slurm's block distribution); 0 otherwise.
  int node_block_size() const { return node_block_size_; }
  const std::string& host() const { return host_; }
  bool has_mpi() const;

  // Every rank's `words` (the same count on each), in rank order, over
  // MPI_COMM_WORLD: the start-up agreement's one collective, made before any
  // Communicator exists. It waits at most `timeout_s` (<= 0: forever) for
  // the other ranks, then throws ddp::Error saying none of them came: a rank
  // that runs another program, or is stuck before it, cannot hang the job.
  std::vector<uint64_t> allgather_words(const std::vector<uint64_t>& words, double timeout_s) const;

  // Ends every rank of the job (MPI_Abort), so no peer waits in a collective.
  [[noreturn]] void abort_job(int exit_code) const;

 private:
  int rank_ = 0, world_size_ = 1, local_rank_ = 0, local_size_ = 1, node_block_size_ = 1;
  std::string host_;
};

}  // namespace ddp
