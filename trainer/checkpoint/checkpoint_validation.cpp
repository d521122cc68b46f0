// checkpoint_validation.cpp: the run-independent invariants of a TrainState
// (checkpoint_validation.h). Each bound says why every checkpoint the
// trainer writes satisfies it; the trainer (trainer/loop/trainer.cpp) starts from
// step = epoch = offset = skipped = 0 and the LossScaler's initial state, and
// changes the position only in train_step and at an epoch's end, the scaler
// only through loss_scale_rule_update (kernels/step_status.h). Every bound
// below is kept by both, so it holds by induction, also across resumes with
// other flags (a resume restores the fields as they are).
#include "trainer/checkpoint/checkpoint_validation.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <vector>

#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/train_state.h"
#include "trainer/checkpoint/model_kinds.h"

namespace ddp {

namespace {

// The names launch/options.cpp accepts for --loss (and the trainer stores in
// its checkpoints as given).
const char* const kLossNames[] = {"xent", "mse"};
// Optimizers (optim/optimizer_kind.h); the model kinds and their activations
// are checkpoint/model_kinds.h's.
const char* const kOptimizers[] = {"sgd", "adamw"};

// Names read from a file may be anything; a message quotes at most this much.
constexpr size_t kMaxQuotedChars = 32;

std::string quoted(const std::string& text) {
  if (text.size() <= kMaxQuotedChars) return "'" + text + "'";
  return "'" + text.substr(0, kMaxQuotedChars) + "...' (" + std::to_string(text.size()) + " bytes)";
}

// Shortest text that reads back as the same double; "nan", "inf", "-inf".
std::string number_text(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char text[32];
  const auto result = std::to_chars(text, text + sizeof text, v);
  return std::string(text, result.ptr);
}

[[noreturn]] void refuse(const std::string& name, const std::string& problem) {
  throw CheckpointError(name, "corrupt contents: " + problem);
}

std::string i64_text(int64_t v) { return std::to_string(v); }

// `Names`: an array or vector of names (C strings or std::string).
template <class Names>
bool is_one_of(const std::string& text, const Names& names) {
  for (const auto& n : names)
    if (text == n) return true;
  return false;
}

template <class Names>
std::string list_of(const Names& names) {
  const size_t n = std::size(names);
  std::string text;
  size_t i = 0;
  for (const auto& name : names) {
    text += (i == 0 ? "" : i + 1 == n ? " or " : ", ") + std::string(name);
    ++i;
  }
  return text;
}

// The model: what restore() sizes its buffers by and the forward pass loops over.
void check_model(const TrainState& s, const std::string& name) {
  if (!is_one_of(s.model_kind, model_kind_names()))
    refuse(name, "model is " + quoted(s.model_kind) + " (must be " + list_of(model_kind_names()) + ")");
  // The dims must describe a model (for the MLP: at least two widths, each
  // > 0); the buffers' lengths are checked against the count they imply below.
  uint64_t count = 0;
  const std::string dims_problem = checkpoint_dims_problem(s.model_kind, s.model_dims, count);
  if (!dims_problem.empty()) refuse(name, dims_problem);
  if (!is_one_of(s.activation, model_activation_names())) {
    refuse(name, "activation is " + quoted(s.activation) + " (must be " + list_of(model_activation_names()) + ")");
  }
  if (!is_one_of(s.loss, kLossNames))
    refuse(name, "loss is " + quoted(s.loss) + " (must be " + list_of(kLossNames) + ")");
  // Both buffers are downloaded whole from the model's parameter store, so
  // their lengths are the parameter count the widths imply (momentum too,
  // before the first step: the buffer exists, zero).
  if (s.master_weights_fp32.size() != count) {
    refuse(name, "master weights hold " + std::to_string(s.master_weights_fp32.size()) + " values, the model dims " +
                     dims_text(s.model_dims) + " need " + std::to_string(count));
  }
  if (s.momentum_fp32.size() != count) {
    refuse(name, "momentum holds " + std::to_string(s.momentum_fp32.size()) + " values, the model dims " +
                     dims_text(s.model_dims) + " need " + std::to_string(count));
  }
  // Version 2 names its tensors; together they are the packed layout.
  if (!s.tensors.empty()) {
    uint64_t named = 0;
    for (const StateTensor& t : s.tensors) {
      uint64_t n = 1;
      for (int64_t d : t.shape) {
        if (d <= 0) refuse(name, "tensor " + quoted(t.name) + " has a dimension " + i64_text(d) + " (must be > 0)");
        n *= static_cast<uint64_t>(d);
      }
      named += n;
    }
    if (named != count)
      refuse(name, "its tensors hold " + std::to_string(named) + " values, the model dims " + dims_text(s.model_dims) +
                       " need " + std::to_string(count));
  }
}

// The optimizer's state: its buffers and its step count.
void check_optimizer(const TrainState& s, const std::string& name) {
  if (!is_one_of(s.optimizer, kOptimizers))
    refuse(name, "optimizer is " + quoted(s.optimizer) + " (must be " + list_of(kOptimizers) + ")");
  const size_t want = s.optimizer == "adamw" ? s.master_weights_fp32.size() : 0;
  if (s.second_moment_fp32.size() != want)
    refuse(name, "exp_avg_sq holds " + std::to_string(s.second_moment_fp32.size()) + " values, " + s.optimizer +
                     " keeps " + std::to_string(want));
  // The optimizer steps on every step that is not skipped, and only then
  // (GradScaler skips optimizer.step()), so its count is the clean steps.
  if (s.optimizer_steps != s.step - s.skipped_steps)
    refuse(name, "optimizer_steps is " + i64_text(s.optimizer_steps) +
                     " (must be step - skipped_steps = " + i64_text(s.step - s.skipped_steps) + ")");
}

// The position in the run: what the LR schedule, the sampler and the loader
// index with.
void check_position(const TrainState& s, const std::string& name) {
  // All three start at 0 and only ever grow (step by 1 per step, the offset
  // by the step's rows) or, for the offset, return to 0 at an epoch's end.
  if (s.step < 0) refuse(name, "step is " + i64_text(s.step) + " (must be >= 0)");
  // No run has more steps than kMaxTrainSteps (train_state.h), resumes included.
  if (s.step > kMaxTrainSteps) refuse(name, "step is " + i64_text(s.step) + " (more than any run's 2^40 steps)");
  if (s.epoch < 0) refuse(name, "epoch is " + i64_text(s.epoch) + " (must be >= 0)");
  // The global batch it was written with (0: not recorded by an older build).
  if (s.global_batch < 0) refuse(name, "global batch is " + i64_text(s.global_batch) + " (must be >= 0)");
  if (s.epoch_sample_offset < 0) {
    refuse(name, "epoch_sample_offset is " + i64_text(s.epoch_sample_offset) + " (must be >= 0)");
  }
  // A step is skipped at most once, and a skipped step still counts as a step.
  if (s.skipped_steps < 0 || s.skipped_steps > s.step) {
    refuse(name, "skipped_steps is " + i64_text(s.skipped_steps) + " (must be in [0, step " + i64_text(s.step) + "])");
  }
  // The epoch advances only after a step that ended it (run(): epoch_done()
  // after train_step), by one, so there were at least as many steps as
  // epochs before this one; this holds with --drop-last and tiny data too,
  // since the trainer refuses a configuration with no step per epoch.
  if (s.epoch > s.step) {
    refuse(name, "epoch is " + i64_text(s.epoch) + " at step " + i64_text(s.step) +
                     " (each epoch ends with a step: must be <= step)");
  }
  // The offset is 0 when an epoch begins and grows only by a step of that
  // epoch, so a non-zero offset means this epoch had a step as well.
  if (s.epoch_sample_offset > 0 && s.epoch >= s.step) {
    refuse(name, "epoch_sample_offset is " + i64_text(s.epoch_sample_offset) + " in epoch " + i64_text(s.epoch) +
                     " at step " + i64_text(s.step) +
                     " (samples of an epoch were consumed by its steps: needs step > epoch)");
  }
}

// The loss scaler (kernels/step_status.h, loss_scale_rule_update) and the
// momentum flag (step_status_finish). skipped_steps is in [0, step] here.
void check_step_state(const TrainState& s, const std::string& name) {
  const int64_t clean_steps = s.step - s.skipped_steps;
  // The first step that is not skipped initialises the momentum (PyTorch SGD
  // copies the gradient), and nothing clears the flag again; a skipped step
  // leaves it as it is.
  if (s.momentum_initialized != (clean_steps > 0)) {
    refuse(name, std::string("momentum_initialized is ") + (s.momentum_initialized ? "1" : "0") + " after " +
                     i64_text(clean_steps) + " step(s) that were not skipped (must be " +
                     (clean_steps > 0 ? "1" : "0") + ")");
  }
  // Every step divides by the scale (1 / (S x N)) and multiplies the loss
  // gradient by it. It starts positive and finite (--init-scale and
  // static:<S> are checked), growth keeps it finite (a growth that would
  // overflow FP32 is not applied), backoff multiplies by a factor in (0, 1]
  // and floors at --min-loss-scale >= 0.
  if (!std::isfinite(s.scaler.scale) || s.scaler.scale <= 0.0) {
    refuse(name, "loss scale is " + number_text(s.scaler.scale) + " (must be finite and > 0)");
  }
  // growth_tracker counts the clean steps since the last growth or backoff:
  // +1 on a clean step, reset to 0 otherwise, so it lies in
  // [0, clean steps]. (Its bound by --growth-interval depends on the run.)
  if (s.scaler.growth_tracker < 0 || s.scaler.growth_tracker > clean_steps) {
    refuse(name, "growth_tracker is " + i64_text(s.scaler.growth_tracker) + " (must be in [0, " +
                     i64_text(clean_steps) + "], the steps that were not skipped)");
  }
  // hysteresis_left starts at --hysteresis >= 1 and is reset to it on a
  // growth; each overflow lowers it by 1 with no floor (Megatron's rule:
  // with --hysteresis 1 the second overflow in a row makes it -1, so 0 and
  // negative values are legitimate). Each overflow is a skipped step, so
  // hysteresis_left + skipped_steps >= 1. (Its upper bound, --hysteresis,
  // depends on the run.)
  const int64_t lowest_hysteresis = 1 - s.skipped_steps;  // skipped_steps >= 0: no overflow
  if (s.scaler.hysteresis_left < lowest_hysteresis) {
    refuse(name, "hysteresis_left is " + i64_text(s.scaler.hysteresis_left) + " after " + i64_text(s.skipped_steps) +
                     " skipped step(s) (each lowers it by 1 from at least 1: must be >= " +
                     i64_text(lowest_hysteresis) + ")");
  }
}

// Index of the first value that is NaN or +-Inf, or values.size(). One pass.
size_t first_non_finite(const std::vector<float>& values) {
  for (size_t i = 0; i < values.size(); ++i)
    if (!std::isfinite(values[i])) return i;
  return values.size();
}

// A step with a non-finite gradient is skipped before the update, so no
// NaN or Inf reaches a master weight or the momentum; one that is there
// would turn every later forward pass into NaN and every step into a skip.
void check_buffers(const TrainState& s, const std::string& name) {
  const struct {
    const char* what;
    const std::vector<float>& values;
  } buffers[] = {{"master weight", s.master_weights_fp32},
                 {"momentum value", s.momentum_fp32},
                 {"exp_avg_sq value", s.second_moment_fp32}};
  for (const auto& b : buffers) {
    const size_t bad = first_non_finite(b.values);
    if (bad != b.values.size()) {
      refuse(name, std::string(b.what) + " " + std::to_string(bad) + " (of " + std::to_string(b.values.size()) +
                       ") is " + number_text(b.values[bad]));
    }
  }
  // A running mean of squares.
  for (size_t i = 0; i < s.second_moment_fp32.size(); ++i)
    if (s.second_moment_fp32[i] < 0.0f)
      refuse(name, "exp_avg_sq value " + std::to_string(i) + " is " + number_text(s.second_moment_fp32[i]) +
                       " (a mean of squares: must be >= 0)");
}

}  // namespace

void validate_checkpoint_contents(const TrainState& s, const std::string& name) {
  // The cheap header fields first; the buffers last (and only once their
  // lengths are known to fit the model).
  check_model(s, name);
  check_position(s, name);
  check_step_state(s, name);
  check_optimizer(s, name);
  check_buffers(s, name);
}

void check_checkpoint_compatible(const TrainState& ckpt, const std::vector<int64_t>& model_dims,
                                 const std::string& activation, const std::string& loss, size_t parameter_count,
                                 const std::string& name) {
  auto fail = [&](const std::string& problem) { throw CheckpointError(name, problem); };
  if (ckpt.model_dims != model_dims) {
    fail("model shape mismatch: checkpoint has layers " + dims_text(ckpt.model_dims) + ", this run " +
         dims_text(model_dims));
  }
  if (ckpt.activation != activation) {
    fail("activation mismatch: checkpoint has " + ckpt.activation + ", this run " + activation);
  }
  if (ckpt.loss != loss) fail("loss mismatch: checkpoint has " + ckpt.loss + ", this run " + loss);
  if (ckpt.master_weights_fp32.size() != parameter_count) {
    fail("parameter count mismatch: checkpoint holds " + std::to_string(ckpt.master_weights_fp32.size()) +
         " master weights, this run's model (" + dims_text(model_dims) + ") has " + std::to_string(parameter_count));
  }
  if (ckpt.momentum_fp32.size() != parameter_count) {
    fail("momentum size mismatch: checkpoint holds " + std::to_string(ckpt.momentum_fp32.size()) +
         " momentum values for " + std::to_string(parameter_count) + " parameters");
  }
}

void check_checkpoint_model_kind(const TrainState& ckpt, const std::string& model_kind, const std::string& name) {
  if (ckpt.model_kind != model_kind)
    throw CheckpointError(
        name, "model mismatch: the checkpoint holds a " + ckpt.model_kind + ", this run trains a " + model_kind);
}

void check_checkpoint_tokenizer(const TrainState& ckpt, const std::string& tokenizer, const std::string& name) {
  if (ckpt.tokenizer.empty() || tokenizer.empty() || ckpt.tokenizer == tokenizer) return;
  throw CheckpointError(name, "tokenizer mismatch: the checkpoint's model reads " + ckpt.tokenizer +
                                  " tokens, this run's data " + tokenizer + " tokens");
}

void check_checkpoint_tensors(const TrainState& ckpt, const ParameterRegistry& registry, const std::string& name) {
  auto fail = [&](const std::string& problem) { throw CheckpointError(name, "model mismatch: " + problem); };
  if (ckpt.tensors.empty()) return;  // version 1: the layout is the MLP's, checked by its dims
  for (size_t i = 0; i < registry.size() || i < ckpt.tensors.size(); ++i) {
    if (i >= ckpt.tensors.size()) fail("tensor " + registry[i].name + " is not in the checkpoint");
    if (i >= registry.size()) fail("tensor " + quoted(ckpt.tensors[i].name) + " is not one of this run's model");
    if (ckpt.tensors[i].name != registry[i].name)
      fail("tensor " + std::to_string(i) + " is " + quoted(ckpt.tensors[i].name) + ", this run's model has " +
           registry[i].name + " there");
    if (ckpt.tensors[i].shape != registry[i].shape)
      fail("tensor " + registry[i].name + " has shape " + dims_text(ckpt.tensors[i].shape) + ", this run's " +
           dims_text(registry[i].shape));
  }
}

void check_checkpoint_optimizer(const TrainState& ckpt, const std::string& optimizer, const std::string& name) {
  if (ckpt.optimizer != optimizer)
    throw CheckpointError(name, "optimizer mismatch: the checkpoint holds " + ckpt.optimizer +
                                    " state, this run uses --optimizer " + optimizer);
}

}  // namespace ddp
