// train_config.cpp: the per-rank batch a world size makes of the config's
// batch flags, the shard groups, and --precision's names. The checks of
// the config's values are config_check.cpp.
#include "trainer/config/train_config.h"

#include <initializer_list>
#include <string>

#include "kernels/error.h"

namespace ddp {

Precision parse_precision(const std::string& text) {
  for (const Precision p : {Precision::Fp16, Precision::Bf16})
    if (text == precision_name(p)) return p;
  throw Error("--precision " + text + ": expected fp16 or bf16");
}

bool parse_grad_reduce_fp32(const std::string& text, Precision precision) {
  if (text == "fp32") return true;
  if (text == precision_name(precision)) return false;
  const std::string given = text.empty() ? "''" : text;
  throw Error("--grad-reduce-dtype " + given + ": expected fp32 or the --precision, " + precision_name(precision));
}

int64_t resolve_batch_per_rank(const TrainConfig& config, int world_size) {
  if (config.global_batch <= 0) return config.batch_size;
  const int64_t per_step = static_cast<int64_t>(world_size) * config.grad_accum;
  if (config.global_batch % per_step != 0)
    throw Error("--global-batch " + std::to_string(config.global_batch) + " does not divide by " +
                std::to_string(world_size) + " ranks x --grad-accum " + std::to_string(config.grad_accum) +
                " (= " + std::to_string(per_step) + ")");
  return config.global_batch / per_step;
}

int resolve_zero_shard_size(const TrainConfig& config, int world_size, int node_block_size) {
  if (config.zero_stage == 0) return world_size;
  const int given = config.zero_shard_size;
  if (given > 0) {
    if (given > world_size || world_size % given != 0)
      throw Error("--zero-shard-size " + std::to_string(given) + " does not divide the world of " +
                  std::to_string(world_size) + " ranks into groups");
    return given;
  }
  // A node of one rank (one rank per host) is no group: it would shard nothing.
  if (node_block_size > 1 && world_size % node_block_size == 0) return node_block_size;
  return world_size;
}

}  // namespace ddp
