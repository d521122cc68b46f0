// communicator.cpp: the Communicator vtable's anchor, the sharded
// collectives' argument checks, and the world of one's copies.
#include "comm/communicator.h"

#include <cstdint>
#include <cstring>
#include <string>

#include "kernels/backend.h"
#include "kernels/error.h"

namespace ddp {

void check_layout_world(const Communicator& comm, const ShardLayout& layout, const char* what) {
  DDP_REQUIRE(layout.world_size() == comm.shard_size(),
              std::string(what) + ": a shard layout of " + std::to_string(layout.world_size()) +
                  " ranks for shard groups of " + std::to_string(comm.shard_size()));
}

void throw_partial_overlap(const char* what) {
  throw Error(std::string(what) + ": the rank's part overlaps the full buffer other than in place");
}

void Communicator::start_allreduce_sum_fp32(float*, size_t) {
  throw Error("--grad-reduce-dtype fp32: the " + name() + " transport has no FP32 sums");
}

void Communicator::start_reduce_scatter_sum_fp32(const float*, float*, const ShardLayout&) {
  throw Error("--grad-reduce-dtype fp32: the " + name() + " transport has no FP32 sums");
}

void SingleProcessCommunicator::copy_bytes(void* dst, const void* src, size_t size_bytes) {
  if (dst == src || size_bytes == 0) return;
  if (copies_ != nullptr) {
    copies_->copy_on_device(dst, src, size_bytes);
  } else {
    std::memcpy(dst, src, size_bytes);
  }
}

void SingleProcessCommunicator::reduce_scatter_sum_lowp(const lowp16* send, lowp16* recv, const ShardLayout& layout) {
  check_layout_world(*this, layout, "reduce_scatter_sum_lowp");
  shard_call_in_place(send, layout.total_count(), recv, 0, layout.total_count(), "reduce_scatter_sum_lowp");
  copy_bytes(recv, send, layout.total_count() * sizeof(lowp16));  // the sum over one rank
}

void SingleProcessCommunicator::start_reduce_scatter_sum_fp32(const float* send, float* recv,
                                                              const ShardLayout& layout) {
  check_layout_world(*this, layout, "reduce_scatter_sum_fp32");
  shard_call_in_place(send, layout.total_count(), recv, 0, layout.total_count(), "reduce_scatter_sum_fp32");
  copy_bytes(recv, send, layout.total_count() * sizeof(float));
}

void SingleProcessCommunicator::allgather_lowp(const lowp16* mine, lowp16* full, const ShardLayout& layout) {
  check_layout_world(*this, layout, "allgather_lowp");
  shard_call_in_place(full, layout.total_count(), mine, 0, layout.total_count(), "allgather_lowp");
  copy_bytes(full, mine, layout.total_count() * sizeof(lowp16));
}

}  // namespace ddp
