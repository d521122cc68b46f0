// sharded_state.cpp
#include "trainer/zero/sharded_state.h"

#include "kernels/error.h"

namespace ddp {

ShardLayout zero_shard_layout(size_t flat_count, int world) {
  return ShardLayout::balanced(flat_count, world, kZeroShardAlignElements);
}

// The all-gather only copies, so the FP32 bits travel unchanged as FP16 pairs.
ShardLayout fp32_state_gather_layout(const ShardLayout& layout) {
  std::vector<size_t> bounds{0};
  for (int r = 0; r < layout.world_size(); ++r) bounds.push_back(2 * layout.range(r).end);
  return ShardLayout(std::move(bounds));
}

std::vector<float> gather_fp32_state(Communicator& comm, const ParameterStore& params, const Buffer<float>& state) {
  DDP_REQUIRE(state.count() == params.owned_count(), "gather_fp32_state: not one of the store's FP32 buffers");
  if (!params.sharded() || comm.shard_size() == 1) return state.download();
  const ShardLayout layout = zero_shard_layout(params.count(), comm.shard_size());
  DDP_REQUIRE(layout.range(comm.shard_rank()) == params.owned(),
              "gather_fp32_state: the store's range is not this rank's");
  Buffer<float> whole(state.backend(), params.count());
  comm.allgather_lowp(reinterpret_cast<const lowp16*>(state.data()), reinterpret_cast<lowp16*>(whole.data()),
                      fp32_state_gather_layout(layout));
  return whole.download();
}

void agree_with_root(Communicator& comm, Backend& backend, std::vector<float>& flat) {
  if (comm.world_size() == 1 || flat.empty()) return;
  Buffer<float> staged(backend, flat.size());
  staged.upload(flat);
  comm.broadcast_bytes(staged.data(), staged.size_bytes(), 0);
  flat = staged.download();
}

}  // namespace ddp
