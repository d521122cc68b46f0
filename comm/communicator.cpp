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

bool shard_call_in_place(const lowp16* whole, size_t whole_count, const lowp16* part, size_t part_offset,
                         size_t part_count, const char* what) {
  if (part == whole + part_offset) return true;
  if (part_count == 0 || whole_count == 0) return false;  // nothing is read or written through both
  // As integers: pointers into different arrays do not compare with <.
  const auto at = [](const lowp16* p) { return reinterpret_cast<std::uintptr_t>(p); };
  const bool disjoint = at(part + part_count) <= at(whole) || at(whole + whole_count) <= at(part);
  DDP_REQUIRE(disjoint, std::string(what) + ": the rank's part overlaps the full buffer other than in place");
  return false;
}

void SingleProcessCommunicator::copy_lowp(lowp16* dst, const lowp16* src, size_t count) {
  if (dst == src || count == 0) return;
  if (copies_ != nullptr) {
    copies_->copy_on_device(dst, src, count * sizeof(lowp16));
  } else {
    std::memcpy(dst, src, count * sizeof(lowp16));
  }
}

void SingleProcessCommunicator::reduce_scatter_sum_lowp(const lowp16* send, lowp16* recv, const ShardLayout& layout) {
  check_layout_world(*this, layout, "reduce_scatter_sum_lowp");
  shard_call_in_place(send, layout.total_count(), recv, 0, layout.total_count(), "reduce_scatter_sum_lowp");
  copy_lowp(recv, send, layout.total_count());  // the sum over one rank
}

void SingleProcessCommunicator::allgather_lowp(const lowp16* mine, lowp16* full, const ShardLayout& layout) {
  check_layout_world(*this, layout, "allgather_lowp");
  shard_call_in_place(full, layout.total_count(), mine, 0, layout.total_count(), "allgather_lowp");
  copy_lowp(full, mine, layout.total_count());
}

}  // namespace ddp
