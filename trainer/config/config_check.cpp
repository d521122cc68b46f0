// config_check.cpp: each field's range first (signs, finiteness), then the
// numbers that are in range but outside their sense (a momentum of 1, a
// backoff that never backs off, batch factors whose products overflow).
// The messages are the command line's: tests and users match them.
#include "trainer/config/config_check.h"

#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "kernels/error.h"
#include "trainer/checkpoint/train_state.h"
#include "trainer/checkpoint/weights_dtype.h"
#include "trainer/data/token_files.h"
#include "trainer/io/json_writer.h"

namespace ddp {
void require_positive(double v, const char* flag) {
  if (!(v > 0)) throw Error(std::string(flag) + " must be positive");
}

void require_non_negative(double v, const char* flag) {
  if (!(v >= 0) || !std::isfinite(v)) throw Error(std::string(flag) + " must be a finite number >= 0");
}

namespace {

void require_in(bool ok, const std::string& message) {
  if (!ok) throw Error(message);
}

// Signs and finiteness, field by field.
void check_ranges(const TrainConfig& c) {
  if (c.device != "auto" && c.device != "cuda" && c.device != "cpu")
    throw Error("--device: '" + c.device + "' is not one of auto, cuda, cpu");
  require_positive(c.batch_size, "--batch-size");
  require_positive(c.grad_accum, "--grad-accum");
  require_non_negative(c.bucket_mb, "--bucket-mb");
  require_non_negative(c.first_bucket_mb, "--first-bucket-mb");
  if (c.global_batch < 0) throw Error("--global-batch must be positive");
  if (!(c.grad_predivide > 0) || !std::isfinite(c.grad_predivide))
    throw Error("--grad-predivide must be a positive number");
  if (c.zero_stage < 0 || c.zero_stage > 3) throw Error("--zero must be 0, 1, 2 or 3");
  if (c.zero_prefetch < 0) throw Error("--zero-prefetch must be >= 0 (0: each layer's gather at its own hook)");
  if (c.zero_shard_size < 0) throw Error("--zero-shard-size must be >= 1 (0: the ranks of one node)");
  weights_dtype_named(c.save_weights_dtype);  // before the run: the weights are written at its end
  if (c.zero_stage >= 2 && c.cuda_graph)
    throw Error("--cuda-graph works with --zero 0 and 1 only (stages 2 and 3 re-point gradients and weights per step)");
  if (c.base_batch < 0) throw Error("--base-batch must be positive");
  if (c.lr_scaling != LrScaling::None && c.base_batch == 0)
    throw Error(std::string("--lr-scaling ") + lr_scaling_name(c.lr_scaling) +
                " needs --base-batch B (the global batch --lr is the rate for)");
  if (!c.trace_path.empty() && c.cuda_graph)
    throw Error("--trace works without --cuda-graph only (a replayed graph has no layer points to mark)");
  if (c.trace_first < 1 || c.trace_last < c.trace_first) throw Error("--trace-steps must be A:B with 1 <= A <= B");
  if (c.inject_overflow_every < 0 || c.inject_overflow_rank < 0)
    throw Error("--inject-overflow-every and --inject-overflow-rank must be >= 0");
  if (c.stall_at_step < 0 || c.stall_rank < 0) throw Error("--stall-at-step and --stall-rank must be >= 0");
  if (c.max_bad_steps < 0) throw Error("--max-bad-steps must be >= 0");
  require_non_negative(c.collective_timeout_s, "--collective-timeout");
  require_positive(c.log_every, "--log-every");
  if (c.eval_every < 0) throw Error("--eval-every must be >= 0 (0: at epoch ends and at the end only)");
  if (c.sample_every < 0) throw Error("--sample-every must be >= 0 (0: off)");
  require_positive(c.data.synthetic_train_samples, "--synthetic-samples");
  parse_token_format(c.data.token_format);  // throws naming --token-format
  if (!(c.data.val_fraction > 0 && c.data.val_fraction < 1)) throw Error("--val-fraction must be in (0, 1)");
  require_positive(c.data.block_size, "--block-size");
  if (c.data.vocab_size < 0) throw Error("--vocab-size must be >= 0 (0: from the data)");
  if (c.steps < 0 || c.stop_after_steps < 0) throw Error("--steps and --stop-after-steps must be >= 0");
  if (c.steps == 0) require_positive(c.epochs, "--epochs");
  if (c.warmup_steps < 0 || c.checkpoint_every < 0 || c.lr_step_size < 0 || c.threads < 0 || c.keep_checkpoints < 0)
    throw Error("--warmup-steps, --checkpoint-every, --lr-step-size, --threads and --keep-checkpoints must be >= 0");
  if (!(c.lr > 0) || !std::isfinite(c.lr)) throw Error("--lr must be a positive number");
  require_non_negative(c.momentum, "--momentum");
  require_non_negative(c.weight_decay, "--weight-decay");
  require_non_negative(c.clip_grad_norm, "--clip-grad-norm");
  require_non_negative(c.loss_scaler.min_scale, "--min-loss-scale");
  if (c.nesterov && c.momentum == 0) throw Error("--nesterov needs --momentum > 0");
  const std::pair<double, const char*> betas[] = {{c.beta1, "--beta1"}, {c.beta2, "--beta2"}};
  for (const auto& [beta, flag] : betas)
    if (!(beta >= 0 && beta < 1)) throw Error(std::string(flag) + " must be in [0, 1)");
  if (!(c.eps > 0) || !std::isfinite(c.eps)) throw Error("--eps must be a positive number");
  if (!(c.loss_scaler.init_scale > 0) || !std::isfinite(c.loss_scaler.init_scale))
    throw Error("--init-scale must be a positive number");
  // The scale multiplies the FP32 loss gradient and its inverse unscales
  // FP32 sums: beyond FP32's range the first is Inf and the second 0.
  const char* scale_flag = c.loss_scaler.mode == LossScaleMode::Static ? "--loss-scale static:<S>" : "--init-scale";
  const std::pair<double, const char*> scales[] = {{c.loss_scaler.init_scale, scale_flag},
                                                   {c.loss_scaler.min_scale, "--min-loss-scale"}};
  for (const auto& [scale, flag] : scales)
    if (scale > std::numeric_limits<float>::max())
      throw Error(std::string(flag) + " " + json_number(scale) +
                  " is beyond FP32's largest value (3.4e38): the scaled loss gradient would be Inf");
  if (!(c.loss_scaler.backoff_factor > 0 && c.loss_scaler.backoff_factor <= 1))
    throw Error("--backoff-factor must be in (0, 1]");
  require_positive(c.loss_scaler.growth_interval, "--growth-interval");
  require_positive(c.loss_scaler.hysteresis, "--hysteresis");
}

// In range, and still without sense. Batch products are checked against the
// world size in check_config_for_world; here each factor is bounded so that
// no product of three of them overflows 64 bits.
void check_sense(const TrainConfig& c) {
  constexpr int64_t kMaxRows = int64_t{1} << 30;
  require_in(c.batch_size <= kMaxRows, "--batch-size " + std::to_string(c.batch_size) + " is above 2^30 samples");
  require_in(c.grad_accum <= kMaxRows, "--grad-accum " + std::to_string(c.grad_accum) + " is above 2^30");
  require_in(c.global_batch <= kMaxRows, "--global-batch " + std::to_string(c.global_batch) + " is above 2^30 samples");
  require_in(c.momentum < 1, "--momentum must be below 1 (SGD diverges at 1 and above)");
  require_in(std::isfinite(c.lr_gamma) && c.lr_gamma > 0, "--lr-gamma must be a positive number");
  require_in(std::isfinite(c.loss_scaler.growth_factor) && c.loss_scaler.growth_factor > 1,
             "--growth-factor must be a number above 1");
  require_in(c.loss_scaler.backoff_factor < 1, "--backoff-factor must be in (0, 1): a backoff of 1 never backs off");
  require_in(std::isfinite(c.loss_scaler.min_scale), "--min-loss-scale must be finite");
  if (c.loss_scaler.mode == LossScaleMode::Dynamic)
    require_in(c.loss_scaler.min_scale <= c.loss_scaler.init_scale,
               "--min-loss-scale is above --init-scale: the scale would start below its floor");
  require_in(c.bucket_mb <= 1 << 20 && c.first_bucket_mb <= 1 << 20,
             "--bucket-mb and --first-bucket-mb must be at most 1 TiB (1048576)");
  require_in(c.collective_timeout_s <= 1e9, "--collective-timeout must be at most 1e9 s (0 waits forever)");
  require_in(c.threads <= 4096, "--threads must be at most 4096");
  require_in(c.epochs <= kMaxRows && c.steps <= kMaxTrainSteps && c.stop_after_steps <= kMaxTrainSteps,
             "--epochs must be at most 2^30 and --steps, --stop-after-steps at most 2^40");
  require_in(c.data.synthetic_train_samples <= kMaxRows, "--synthetic-samples must be at most 2^30");
  // A sample is one line of the log, drawn between two steps.
  require_in(
      c.sample_length >= 1 && c.sample_length <= kMaxSampleTokens,
      "--sample-length must be at least 1 and at most 2^20 tokens (it is " + std::to_string(c.sample_length) + ")");
  // A window is held as 2 x T int32 and a position table has T rows: far
  // beyond any context trained here, and no product with T overflows.
  require_in(c.data.block_size <= kMaxBlockSize, "--block-size must be at most 2^20 tokens");
  // An embedding table has V rows: 2^24 is 300 x GPT-2's vocabulary.
  require_in(c.data.vocab_size <= kMaxVocabSize, "--vocab-size must be at most 2^24");
}

}  // namespace

void check_train_config(const TrainConfig& c) {
  check_ranges(c);
  check_sense(c);
}

void check_config_for_world(const TrainConfig& c, int world_size) {
  // The global batch and the samples of an epoch are products of these;
  // each is at most 2^30 (check_sense), so 2^62 bounds any product.
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
  resolve_zero_shard_size(c, world_size, 0);  // a given size must divide the world
}

const TrainConfig& checked_train_config(const TrainConfig& c, int world_size) {
  check_train_config(c);
  check_config_for_world(c, world_size);
  return c;
}

}  // namespace ddp
