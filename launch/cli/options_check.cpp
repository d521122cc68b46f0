// options_check.cpp
#include "launch/cli/options_check.h"

#include <cmath>
#include <utility>
#include <vector>

#include "kernels/error.h"
#include "launch/cli/mode_flags.h"
#include "trainer/checkpoint/weights_dtype.h"
#include "trainer/checkpoint/weights_io.h"
#include "trainer/config/model_catalog.h"
#include "trainer/config/model_table.h"
#include "trainer/io/input_file.h"

namespace ddp {
namespace {

// A config file is a few dozen lines; anything larger is not one.
constexpr size_t kMaxConfigBytes = size_t{1} << 20;

// Which --data kind each data-file flag belongs to.
struct DataFlag {
  const char* flag;
  const char* kind;
};
constexpr DataFlag kDataFlags[] = {
    {"data-dir", "fashion-mnist"},
    {"train-images", "idx"},
    {"train-labels", "idx"},
    {"test-images", "idx"},
    {"test-labels", "idx"},
    {"train-x", "npy"},
    {"train-y", "npy"},
    {"test-x", "npy"},
    {"test-y", "npy"},
    {"train-csv", "csv"},
    {"test-csv", "csv"},
    {"synthetic-samples", "synthetic"},
    {"train-text", "text"},
    {"val-text", "text"},
    {"val-fraction", "text"},
    {"token-format", "text"},
};

// Flags that have a meaning only with another one (or with a mode).
struct Needs {
  const char* flag;
  const char* needed;  // the flag that gives it a meaning
  bool (*holds)(const TrainConfig&);
  bool harmless_unmet = true;  // without its meaning the flag does nothing (a config may carry it)
};
bool has_checkpoint_dir(const TrainConfig& c) { return !c.checkpoint_dir.empty(); }
bool step_schedule(const TrainConfig& c) { return c.lr_schedule == LrScheduleKind::Step; }
bool dynamic_scaling(const TrainConfig& c) { return c.loss_scaler.mode == LossScaleMode::Dynamic; }
bool injecting(const TrainConfig& c) { return !c.inject_overflow_steps.empty() || c.inject_overflow_every > 0; }
bool stalling(const TrainConfig& c) { return c.stall_at_step > 0; }
bool sgd(const TrainConfig& c) { return c.optimizer == OptimizerKind::Sgd; }
bool adamw(const TrainConfig& c) { return c.optimizer == OptimizerKind::AdamW; }
bool generating(const TrainConfig& c) { return c.given_flags.count("generate") > 0; }
bool sampling(const TrainConfig& c) { return c.sample_every > 0; }
bool generating_or_sampling(const TrainConfig& c) { return generating(c) || sampling(c); }
// --sample-every 0 is off, on any model.
bool next_token_or_not_sampling(const TrainConfig& c) { return model_reads_tokens(c) || !sampling(c); }
// --generate with --init-weights, and --bench of a next-token model (random
// windows), take the model's context and vocabulary from these flags.
bool bench_tokens(const TrainConfig& c) { return c.given_flags.count("bench") > 0 && model_reads_tokens(c); }
bool token_data(const TrainConfig& c) { return c.data.kind == "text" || generating(c) || bench_tokens(c); }
bool tracing(const TrainConfig& c) { return !c.trace_path.empty(); }
bool lr_scaled(const TrainConfig& c) { return c.lr_scaling != LrScaling::None; }
bool feature_model(const TrainConfig& c) { return !model_reads_tokens(c); }
constexpr Needs kNeeds[] = {
    {"keep-checkpoints", "--checkpoint-dir", has_checkpoint_dir},
    {"trace-steps", "--trace (the file the timeline goes to)", tracing},
    {"base-batch", "--lr-scaling linear or sqrt", lr_scaled},
    {"checkpoint-every", "--checkpoint-dir", has_checkpoint_dir},
    {"async-checkpoint", "--checkpoint-dir", has_checkpoint_dir},
    // Without a checkpoint the steps done are lost: the run cannot be continued.
    {"stop-after-steps", "--checkpoint-dir (a checkpoint to --resume from)", has_checkpoint_dir, false},
    {"lr-step-size", "--lr-schedule step", step_schedule},
    {"lr-gamma", "--lr-schedule step", step_schedule},
    {"init-scale", "--loss-scale dynamic (static:<S> sets its own scale)", dynamic_scaling},
    {"growth-factor", "--loss-scale dynamic", dynamic_scaling},
    {"backoff-factor", "--loss-scale dynamic", dynamic_scaling},
    {"growth-interval", "--loss-scale dynamic", dynamic_scaling},
    {"hysteresis", "--loss-scale dynamic", dynamic_scaling},
    {"min-loss-scale", "--loss-scale dynamic", dynamic_scaling},
    {"inject-overflow-rank", "--inject-overflow or --inject-overflow-every", injecting},
    {"stall-rank", "--stall-at-step", stalling},
    {"momentum", "--optimizer sgd (AdamW's momentum is --beta1)", sgd},
    {"nesterov", "--optimizer sgd", sgd},
    {"beta1", "--optimizer adamw", adamw},
    {"beta2", "--optimizer adamw", adamw},
    {"eps", "--optimizer adamw", adamw},
    // A GPT's shape flags; until --model gpt, the token windows of --data text are what they shape.
    {"block-size", "--data text (the context of its token windows)", token_data},
    {"vocab-size", "--data text (the vocabulary of its tokens)", token_data},
    {"prompt", "--generate or --sample-every", generating_or_sampling, false},
    {"temperature", "--generate or --sample-every", generating_or_sampling, false},
    {"top-k", "--generate or --sample-every", generating_or_sampling, false},
    {"sample-every", "--model gpt (a language model)", next_token_or_not_sampling, false},
    {"sample-length", "--sample-every", sampling},
    {"generate-logits", "--generate", generating},
    {"kv-cache", "--generate or --sample-every", generating_or_sampling, false},
    {"tokenizer", "--data text or --generate (a language model's tokens)", token_data},
};
// The flags of one model only (each row's ModelFlag list, model_table.h)
// are refused with another, as a Needs row is.

bool given(const TrainConfig& c, const char* flag) { return c.given_flags.count(flag) > 0; }
bool on_command_line(const TrainConfig& c, const char* flag) { return c.command_line_flags.count(flag) > 0; }
bool from_config(const TrainConfig& c, const char* flag) { return given(c, flag) && !on_command_line(c, flag); }

// A model's own flag given with another model (from a config file under a
// --model on the command line, it is ignored, as a Needs row's would be).
void check_model_flags(const TrainConfig& c) {
  for (const ModelRow* row : model_rows()) {
    if (row->kind.name == c.model) continue;
    for (const ModelFlag& f : row->flags) {
      const char* flag = f.flag.c_str();
      if (!given(c, flag) || from_config(c, flag) || model_row(c.model).reads_flag(f.flag)) continue;
      throw Error("--" + f.flag + " needs --model " + row->kind.name + (f.hint.empty() ? "" : " (" + f.hint + ")"));
    }
  }
}

// The sampling flags of --generate and --sample-every, as values.
void check_sampling_values(const TrainConfig& c) {
  if (given(c, "prompt") && c.prompt.empty())
    throw Error("--prompt is empty: give at least one byte for the model to continue");
  if (!(c.temperature >= 0) || !std::isfinite(c.temperature))
    throw Error("--temperature must be a finite number >= 0 (0: greedy); it is " + std::to_string(c.temperature));
  if (c.top_k < 0) throw Error("--top-k must be >= 0 (0: off); it is " + std::to_string(c.top_k));
}

// --generate: a GPT's weights and a prompt; nothing of training means anything.
void check_generate_flags(const TrainConfig& c) {
  if (!model_reads_tokens(c)) throw Error("--generate needs --model gpt (a language model)");
  if (c.generate_tokens < 1 || c.generate_tokens > (int64_t{1} << 30))
    throw Error("--generate must be at least 1 and at most 2^30 tokens (it is " + std::to_string(c.generate_tokens) +
                ")");
  if (!given(c, "prompt")) throw Error("--generate needs --prompt (the text the model continues)");
  check_sampling_values(c);
  if (!c.resume && c.init_weights_dir.empty())
    throw Error("--generate needs --resume or --init-weights (the weights to sample from)");
}

// At most one of the modes that replace training.
void check_one_mode(const TrainConfig& c, const BenchOptions& bench) {
  const bool predicting = given(c, "predict") || given(c, "predictions");
  const int modes = int{generating(c)} + int{predicting} + int{c.eval_only} + int{bench.enabled};
  // --predict reads feature rows; a GPT continues text instead (before the
  // flags a GPT's run gives that --predict does not read).
  if (predicting && !feature_model(c)) throw Error("--predict needs --model mlp (a GPT's inference is --generate)");
  if (modes <= 1) return;
  if (generating(c)) throw Error("--generate, --predict, --eval-only and --bench contradict each other: give one");
  if (predicting) throw Error("--predict, --eval-only and --bench contradict each other: give one");
  throw Error("--eval-only and --bench contradict each other: give one");
}

}  // namespace

void check_flags_as_a_whole(TrainConfig& c, const BenchOptions& bench) {
  // An empty path is a mistake (an unset shell variable), never "off".
  const DataConfig& d = c.data;
  const std::pair<const char*, const std::string*> paths[] = {
      {"metrics", &c.metrics_path},
      {"checkpoint-dir", &c.checkpoint_dir},
      {"save-weights", &c.save_weights_dir},
      {"init-weights", &c.init_weights_dir},
      {"gpt2-ranks", &c.gpt2_ranks_path},
      {"generate-logits", &c.generate_logits_path},
      {"config", &c.config_path},
      {"data-dir", &d.data_dir},
      {"train-images", &d.train_images},
      {"train-labels", &d.train_labels},
      {"test-images", &d.test_images},
      {"test-labels", &d.test_labels},
      {"train-x", &d.train_x},
      {"train-y", &d.train_y},
      {"test-x", &d.test_x},
      {"test-y", &d.test_y},
      {"train-csv", &d.train_csv},
      {"test-csv", &d.test_csv},
      {"train-text", &d.train_text},
      {"val-text", &d.val_text},
      {"trace", &c.trace_path},
  };
  for (const auto& [flag, value] : paths)
    if (given(c, flag) && value->empty()) throw Error(std::string("--") + flag + ": the path is empty");
  // The mode first: a flag it does not read is named as such, before a rule
  // below could send the user to another flag the mode does not read either.
  check_one_mode(c, bench);
  check_mode_flags(c, run_mode(c, bench));
  // The command line wins over the config file: a config's flag that the
  // command line makes meaningless (another --data kind, another mode) is
  // ignored, as a flag the command line contradicts is overridden. Within one
  // source, the same problems are errors.
  for (const DataFlag& d : kDataFlags)
    if (given(c, d.flag) && c.data.kind != d.kind && !(from_config(c, d.flag) && on_command_line(c, "data")))
      throw Error(std::string("--") + d.flag + " is for --data " + d.kind + ", and this run has --data " + c.data.kind);
  for (const Needs& n : kNeeds)
    if (given(c, n.flag) && !n.holds(c) && !(from_config(c, n.flag) && n.harmless_unmet))
      throw Error(std::string("--") + n.flag + " needs " + n.needed);
  check_model_flags(c);

  if (given(c, "init-weights") && c.resume) {
    if (from_config(c, "init-weights") && on_command_line(c, "resume"))
      c.init_weights_dir.clear();
    else if (on_command_line(c, "init-weights") && from_config(c, "resume")) {
      c.resume = false;
      c.resume_path.clear();
    } else
      throw Error(
          "--init-weights and --resume contradict each other: a resume continues from its checkpoint's weights");
  }
  if (c.resume && c.resume_path.empty() && c.checkpoint_dir.empty())
    throw Error("--resume without a PATH needs --checkpoint-dir (where to find the newest checkpoint)");
  if (given(c, "steps") && given(c, "epochs") && c.steps > 0) {
    if (from_config(c, "steps") && on_command_line(c, "epochs"))
      c.steps = 0;
    else if (!(on_command_line(c, "steps") && from_config(c, "epochs")))
      throw Error("--steps and --epochs contradict each other: --steps replaces --epochs, give one");
  }
  if (given(c, "val-text") && given(c, "val-fraction")) {
    // Validation is a file or the end of the training text, not both.
    if (from_config(c, "val-fraction") && on_command_line(c, "val-text"))
      c.data.val_fraction = DataConfig{}.val_fraction;
    else if (from_config(c, "val-text") && on_command_line(c, "val-fraction"))
      c.data.val_text.clear();
    else
      throw Error(
          "--val-text and --val-fraction contradict each other: validate on a file or on the end of "
          "--train-text, give one");
  }
  if (given(c, "global-batch") && c.global_batch <= 0) throw Error("--global-batch must be positive");
  const bool predicting = given(c, "predict") || given(c, "predictions");
  if (predicting) {
    if (c.predict_path.empty() || c.predictions_path.empty())
      throw Error("--predict and --predictions go together: the rows to predict and where the outputs go");
    if (!c.resume && c.init_weights_dir.empty())
      throw Error("--predict needs --resume or --init-weights (the weights to predict with)");
  } else if (given(c, "predict-output")) {
    throw Error("--predict-output needs --predict");
  }
  if (generating(c))
    check_generate_flags(c);
  else if (sampling(c))
    check_sampling_values(c);
  const SafetensorsDtype weights_dtype = weights_dtype_named(c.save_weights_dtype);
  if (weights_dtype != SafetensorsDtype::F32) {
    if (c.save_weights_dir.empty())
      throw Error("--save-weights-dtype " + c.save_weights_dtype + " needs --save-weights");
    if (c.weights_format != "hf" && !is_safetensors_path(c.save_weights_dir))
      throw Error("--save-weights-dtype " + c.save_weights_dtype + ": --save-weights " + c.save_weights_dir +
                  " is a directory of .npy files, which are fp32 only here; name a .safetensors file or give "
                  "--weights-format hf");
  }
  if (c.weights_format != "auto" && c.weights_format != "hf")
    throw Error("--weights-format: '" + c.weights_format + "' is not one of auto, hf");
  if (c.weights_format == "hf") {
    if (c.save_weights_dir.empty())
      throw Error("--weights-format hf needs --save-weights DIR (the directory it writes)");
    if (c.model != "gpt") throw Error("--weights-format hf needs --model gpt (Hugging Face GPT-2)");
    if (is_safetensors_path(c.save_weights_dir))
      throw Error("--weights-format hf writes a directory (config.json, model.safetensors): --save-weights " +
                  c.save_weights_dir + " names a .safetensors file");
  }
  if (c.predict_output.empty()) c.predict_output = c.loss == LossKind::SoftmaxCrossEntropy ? "class" : "logits";
  if (c.predict_output != "logits" && c.predict_output != "probs" && c.predict_output != "class")
    throw Error("--predict-output: '" + c.predict_output + "' is not one of logits, probs, class");
  if (c.predict_output != "logits" && c.loss != LossKind::SoftmaxCrossEntropy)
    throw Error("--predict-output " + c.predict_output +
                " needs a classifier (--loss xent): a regression predicts logits");
  if (c.eval_only) {
    if (!c.resume && c.init_weights_dir.empty())
      throw Error("--eval-only needs --resume or --init-weights (the weights to evaluate)");
  }
  if (!bench.enabled) {
    for (const char* flag : {"bench-warmup", "bench-steps", "peak-tflops"})
      if (on_command_line(c, flag)) throw Error(std::string("--") + flag + " needs --bench");
  }
}

std::string read_config_text(const std::string& path) {
  std::string text;
  try {
    text = read_text_file(path, kMaxConfigBytes, "config file");
  } catch (const InputFileError& e) {
    throw Error("--config " + e.path() + ": " + e.problem());
  }
  // Editors on some systems start UTF-8 text with a byte-order mark, which
  // would glue itself to the first key.
  if (text.rfind("\xef\xbb\xbf", 0) == 0) text.erase(0, 3);
  if (text.find('\0') != std::string::npos)
    throw Error("--config " + path + ": not a text file (it holds NUL bytes); give an INI file of key = value lines");
  return text;
}

}  // namespace ddp
