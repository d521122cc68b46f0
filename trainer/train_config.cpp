// train_config.cpp: the one rule of TrainConfig that depends on the world
// size, kept beside the data it reads.
#include "trainer/train_config.h"

#include <string>

#include "kernels/error.h"

namespace ddp {

void check_config_for_world(const TrainConfig& c, int world_size) {
  // The global batch and the samples of an epoch are products of these;
  // each is at most 2^30 (options_check.cpp), so 2^62 bounds any product.
  int64_t per_step = 0;
  if (__builtin_mul_overflow(c.batch_size, c.grad_accum, &per_step) ||
      __builtin_mul_overflow(per_step, static_cast<int64_t>(world_size), &per_step) || per_step > (int64_t{1} << 40))
    throw Error("--batch-size " + std::to_string(c.batch_size) + " x --grad-accum " + std::to_string(c.grad_accum) +
                " x " + std::to_string(world_size) + " ranks is more than 2^40 samples per step");
  const auto rank_must_exist = [&](int64_t rank, bool used, const char* flag) {
    if (used && rank >= world_size)
      throw Error(std::string(flag) + " " + std::to_string(rank) + ": there is no such rank in a world of " +
                  std::to_string(world_size) + " (ranks 0 to " + std::to_string(world_size - 1) + ")");
  };
  rank_must_exist(c.inject_overflow_rank, !c.inject_overflow_steps.empty() || c.inject_overflow_every > 0,
                  "--inject-overflow-rank");
  rank_must_exist(c.stall_rank, c.stall_at_step > 0, "--stall-rank");
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

}  // namespace ddp
