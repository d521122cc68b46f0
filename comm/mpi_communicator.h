// mpi_communicator.h: the Communicator over MPI, for CPU ranks (and GPU hosts
// without NCCL). FP16 sums use a user-defined commutative MPI operation that
// adds in FP32 and rounds to FP16 at each step, as NCCL's FP16 reduction does.
// Buffers are host memory (the CPU backend's).
#pragma once

#include <mpi.h>

#include "comm/communicator.h"

namespace ddp {

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(MPI_Comm comm = MPI_COMM_WORLD);
  ~MpiCommunicator() override;
  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  std::string name() const override { return "MPI"; }
  void allreduce_sum_fp16(half16* data, size_t count) override;
  void broadcast_bytes(void* data, size_t size_bytes, int root) override;
  double allreduce_sum_host(double value) override;
  void barrier() override;
  double take_allreduce_seconds() override;

 private:
  MPI_Comm comm_;
  int rank_ = 0, world_size_ = 1;
  MPI_Datatype half_type_ = MPI_DATATYPE_NULL;
  MPI_Op half_sum_ = MPI_OP_NULL;
  double allreduce_seconds_ = 0.0;  // since the last take_allreduce_seconds()
};

}  // namespace ddp
