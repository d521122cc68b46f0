// mpi_communicator.cpp
#include "comm/mpi_communicator.h"

#include <algorithm>
#include <climits>

#include "comm/mpi_check.h"
#include "kernels/half_convert.h"

namespace ddp {
namespace {
// inout[i] = fp16(float(in[i]) + float(inout[i])): one rounding per pairwise
// step. In blocks through the bulk (F16C) conversions: MPI calls this on
// every received segment, and per-element scalar conversions made it the
// bottleneck of the CPU all-reduce.
void half_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  constexpr int kBlock = 1024;
  const half16* a = static_cast<const half16*>(in);
  half16* b = static_cast<half16*>(inout);
  float fa[kBlock], fb[kBlock];
  for (int off = 0; off < *len; off += kBlock) {
    const int n = std::min(kBlock, *len - off);
    half_to_float_array(a + off, fa, n);
    half_to_float_array(b + off, fb, n);
    for (int i = 0; i < n; ++i) fb[i] += fa[i];
    float_to_half_array(fb, b + off, n);
  }
}
// MPI counts are int: large buffers go in chunks.
constexpr size_t kMaxChunk = static_cast<size_t>(INT_MAX) / 2;
}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm comm) : comm_(comm) {
  DDP_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  DDP_MPI_CHECK(MPI_Comm_size(comm_, &world_size_));
  DDP_MPI_CHECK(MPI_Type_contiguous(2, MPI_BYTE, &half_type_));
  DDP_MPI_CHECK(MPI_Type_commit(&half_type_));
  DDP_MPI_CHECK(MPI_Op_create(&half_sum, /*commute=*/1, &half_sum_));
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (half_sum_ != MPI_OP_NULL) MPI_Op_free(&half_sum_);
  if (half_type_ != MPI_DATATYPE_NULL) MPI_Type_free(&half_type_);
}

void MpiCommunicator::allreduce_sum_fp16(half16* data, size_t count) {
  if (world_size_ == 1) return;
  const double start = MPI_Wtime();
  for (size_t off = 0; off < count; off += kMaxChunk) {
    const int n = static_cast<int>(std::min(kMaxChunk, count - off));
    DDP_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data + off, n, half_type_, half_sum_, comm_));
  }
  allreduce_seconds_ += MPI_Wtime() - start;
}

double MpiCommunicator::take_allreduce_seconds() {
  const double s = allreduce_seconds_;
  allreduce_seconds_ = 0.0;
  return s;
}

void MpiCommunicator::broadcast_bytes(void* data, size_t size_bytes, int root) {
  if (world_size_ == 1) return;
  char* p = static_cast<char*>(data);
  for (size_t off = 0; off < size_bytes; off += kMaxChunk) {
    const int n = static_cast<int>(std::min(kMaxChunk, size_bytes - off));
    DDP_MPI_CHECK(MPI_Bcast(p + off, n, MPI_BYTE, root, comm_));
  }
}

double MpiCommunicator::allreduce_sum_host(double value) {
  double sum = value;
  if (world_size_ > 1) DDP_MPI_CHECK(MPI_Allreduce(&value, &sum, 1, MPI_DOUBLE, MPI_SUM, comm_));
  return sum;
}

void MpiCommunicator::barrier() {
  if (world_size_ > 1) DDP_MPI_CHECK(MPI_Barrier(comm_));
}

}  // namespace ddp
