// options.cpp
#include "launch/cli/options.h"

#include <boost/program_options.hpp>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>

#include "kernels/error.h"
#include "launch/cli/options_check.h"
#include "trainer/config/config_check.h"
#include "trainer/config/model_table.h"
#include "trainer/io/int_list.h"
#include "trainer/models/mlp/mlp_config.h"
#include "trainer/report/trace_window.h"

namespace po = boost::program_options;

namespace ddp {

namespace {

// Boost.Program_options (1.74 at least) builds an error's what() by
// replacing each %placeholder% of its template until none is left, so a
// value that contains a placeholder (`--lr %value%`, a config key
// "%canonical_option%") loops forever while the message grows (found by
// tests/fuzz/fuzz_config.cpp). Before what() is called, every '%' in the
// substituted values becomes U+FF05 (a full-width percent sign), so no
// placeholder can reappear and every other message stays Boost's own. The
// values are protected members; a pointer to member formed through a derived
// class reads them without copying or slicing the exception.
struct PlaceholderValues : po::error_with_option_name {
  static const std::map<std::string, std::string>& of(const po::error_with_option_name& e) {
    return e.*(&PlaceholderValues::m_substitutions);
  }
};

void defuse_placeholders(po::error_with_option_name& e) {
  const std::map<std::string, std::string> values = PlaceholderValues::of(e);
  for (const auto& [key, value] : values) {
    if (value.find('%') == std::string::npos) continue;
    std::string safe;
    for (char ch : value) safe += ch == '%' ? std::string("\xef\xbc\x85") : std::string(1, ch);
    e.set_substitute(key, safe);
  }
}

std::vector<int64_t> parse_step_list(const std::string& text, const char* flag) {
  std::vector<int64_t> steps;
  if (!parse_int_list(text, 1, INT64_MAX, steps))
    throw Error(std::string(flag) + ": '" + text + "' is not a comma-separated list of steps >= 1");
  return steps;
}

}  // namespace

ParsedOptions parse_options(int argc, const char* const argv[]) {
  ParsedOptions out;
  TrainConfig& c = out.config;
  std::string lr_scaling = "none";
  std::string layers = "784,512,512,10", activation = "relu", loss = "xent", schedule = "cosine",
              loss_scale = "dynamic", optimizer = "sgd", config_file;
  int64_t seed = 0;

  po::options_description general("General");
  general.add_options()
      ("help,h", "show this help and exit")
      ("config", po::value(&config_file), "INI file with the same options (key = value); the command line wins")
      ("device", po::value(&c.device)->default_value(c.device), "auto | cuda | cpu (auto: CUDA when a GPU is visible)")
      ("threads", po::value(&c.threads)->default_value(c.threads), "CPU compute threads per rank (0: the cores mpirun bound the rank to, else cores / local ranks)")
      ("collective-timeout", po::value(&c.collective_timeout_s)->default_value(c.collective_timeout_s),
       "seconds a collective may wait for the other ranks before this rank ends the job (0: wait forever)");

  po::options_description data("Data");
  data.add_options()
      ("data", po::value(&c.data.kind)->default_value(c.data.kind), "fashion-mnist | idx | npy | csv | synthetic | text")
      ("data-dir", po::value(&c.data.data_dir)->default_value(c.data.data_dir), "Fashion-MNIST directory (gzipped IDX)")
      ("train-images", po::value(&c.data.train_images), "IDX training images")
      ("train-labels", po::value(&c.data.train_labels), "IDX training labels")
      ("test-images", po::value(&c.data.test_images), "IDX test images")
      ("test-labels", po::value(&c.data.test_labels), "IDX test labels")
      ("train-x", po::value(&c.data.train_x), ".npy training features [N, D]")
      ("train-y", po::value(&c.data.train_y), ".npy training labels [N] or targets [N, K]")
      ("test-x", po::value(&c.data.test_x), ".npy test features")
      ("test-y", po::value(&c.data.test_y), ".npy test labels or targets")
      ("train-csv", po::value(&c.data.train_csv), "CSV training set (label last, optional header)")
      ("test-csv", po::value(&c.data.test_csv), "CSV test set")
      ("train-text", po::value(&c.data.train_text),
       "--data text: training tokens: any file as bytes, an llm.c .bin shard, or raw uint16 (--token-format)")
      ("val-text", po::value(&c.data.val_text), "--data text: validation tokens, in the same encoding")
      ("val-fraction", po::value(&c.data.val_fraction)->default_value(c.data.val_fraction, "0.1"),
       "--data text without --val-text: validate on the last F of --train-text (cut at a window boundary)")
      ("token-format", po::value(&c.data.token_format)->default_value(c.data.token_format),
       "auto | bytes | raw-u16 (auto: an llm.c .bin shard by its magic, else the bytes)")
      ("synthetic-samples", po::value(&c.data.synthetic_train_samples)->default_value(c.data.synthetic_train_samples),
       "training samples of --data synthetic")
      ("no-shuffle", po::bool_switch(), "keep the data order (no per-epoch shuffle)")
      ("drop-last", po::bool_switch(&c.drop_last), "drop the last partial batch of each epoch")
      ("no-prefetch", po::bool_switch(),
       "load each batch when its step needs it, instead of copying it to the device one batch ahead (for timing)");

  po::options_description model("Model");
  model.add_options()
      ("layers", po::value(&layers)->default_value(layers), "widths: input,hidden...,output (synthetic data: 10,10)")
      ("activation", po::value(&activation)->default_value(activation), "relu | gelu")
      ("loss", po::value(&loss)->default_value(loss), "xent | mse (synthetic data: mse)");

  po::options_description gpt("GPT (--model gpt: nanoGPT's GPT-2 architecture)");
  gpt.add_options()
      ("model", po::value(&c.model)->default_value(c.model), "mlp | gpt (gpt needs --data text, or --bench: random token windows)")
      ("n-layer", po::value(&c.gpt.n_layer)->default_value(c.gpt.n_layer), "transformer blocks")
      ("n-head", po::value(&c.gpt.n_head)->default_value(c.gpt.n_head), "attention heads (must divide --n-embd)")
      ("n-embd", po::value(&c.gpt.n_embd)->default_value(c.gpt.n_embd), "channels C of the residual stream")
      ("block-size", po::value(&c.data.block_size)->default_value(c.data.block_size),
       "tokens of context T: samples are windows of T+1 tokens at stride T")
      ("vocab-size", po::value(&c.data.vocab_size)->default_value(c.data.vocab_size),
       "the model's vocabulary, at least the tokens' (0: from the data: 256 for bytes, GPT-2's 50257 padded to "
       "50304 for llm.c and raw-u16 files)");

  po::options_description optim("Optimisation");
  optim.add_options()
      ("batch-size", po::value(&c.batch_size)->default_value(c.batch_size), "samples per micro-batch per rank")
      ("global-batch", po::value(&c.global_batch)->default_value(0),
       "samples per optimizer step over all ranks, instead of --batch-size (must divide by ranks x --grad-accum)")
      ("grad-accum", po::value(&c.grad_accum)->default_value(1),
       "micro-batches per optimizer step; gradients are all-reduced after the last only")
      ("bucket-mb", po::value(&c.bucket_mb)->default_value(c.bucket_mb),
       "all-reduce bucket size in MiB; a bucket's all-reduce overlaps the rest of backward (0: one after backward)")
      ("first-bucket-mb", po::value(&c.first_bucket_mb)->default_value(c.first_bucket_mb),
       "size of the first bucket (the last layers), small so communication starts early")
      ("cuda-graph", po::bool_switch(&c.cuda_graph),
       "capture the training step in a CUDA graph once its shapes are fixed and replay it (CUDA only; "
       "log steps, the short last step of an epoch and --grad-accum steps run eagerly)")
      ("grad-predivide", po::value(&c.grad_predivide)->default_value(1.0),
       "divide gradients by F before the all-reduce and by ranks/F after (less overflow risk, coarser FP16 sums)")
      ("zero", po::value(&c.zero_stage)->default_value(0),
       "ZeRO stage: 0 every rank holds all the state; 1 each rank holds its range of the FP32 masters and "
       "optimizer state (gradients reduce-scattered, FP16 weights all-gathered); 2 also of the FP16 gradients "
       "(with --grad-accum 1); 3 also of the FP16 weights (each layer's gathered before its forward and backward)")
      ("epochs", po::value(&c.epochs)->default_value(c.epochs), "passes over the training set")
      ("steps", po::value(&c.steps)->default_value(0), "iterations to run instead of --epochs (0: use --epochs)")
      ("stop-after-steps", po::value(&c.stop_after_steps)->default_value(0),
       "end this run after N iterations, with a checkpoint (e.g. to fit a scheduler slot); --resume continues")
      ("seed", po::value(&seed)->default_value(0), "seed for initialisation and shuffling")
      ("optimizer", po::value(&optimizer)->default_value(optimizer),
       "sgd | adamw (torch.optim.AdamW: decoupled weight decay, none on biases)")
      ("lr", po::value(&c.lr)->default_value(c.lr), "base learning rate (AdamW: try 1e-3)")
      ("momentum", po::value(&c.momentum)->default_value(c.momentum), "SGD momentum")
      ("nesterov", po::bool_switch(&c.nesterov), "Nesterov momentum (SGD)")
      ("beta1", po::value(&c.beta1)->default_value(c.beta1), "AdamW: first-moment decay")
      ("beta2", po::value(&c.beta2)->default_value(c.beta2), "AdamW: second-moment decay")
      ("eps", po::value(&c.eps)->default_value(c.eps), "AdamW: added to the denominator")
      ("weight-decay", po::value(&c.weight_decay)->default_value(c.weight_decay),
       "SGD: L2 weight decay on every tensor (torch SGD); AdamW: decoupled decay, weights only")
      ("lr-schedule", po::value(&schedule)->default_value(schedule), "constant | step | cosine (over all steps)")
      ("lr-scaling", po::value(&lr_scaling)->default_value(lr_scaling),
       "none | linear | sqrt: --lr is the rate for global batch --base-batch, scaled to this run's global batch "
       "(linear: x G/B, Goyal et al. 2017, with --warmup-steps; sqrt: x sqrt(G/B), common for AdamW)")
      ("base-batch", po::value(&c.base_batch)->default_value(0), "--lr-scaling: the global batch --lr is meant for")
      ("warmup-steps", po::value(&c.warmup_steps)->default_value(c.warmup_steps), "linear warm-up iterations")
      ("lr-step-size", po::value(&c.lr_step_size)->default_value(0), "step schedule: iterations per decay (0: a third)")
      ("lr-gamma", po::value(&c.lr_gamma)->default_value(c.lr_gamma), "step schedule: decay factor")
      ("clip-grad-norm", po::value(&c.clip_grad_norm)->default_value(0.0), "clip the global L2 norm (0: off)");

  po::options_description scaling("Loss scaling");
  scaling.add_options()
      ("loss-scale", po::value(&loss_scale)->default_value(loss_scale), "dynamic | static:<S> | none")
      ("init-scale", po::value(&c.loss_scaler.init_scale)->default_value(65536.0), "initial dynamic scale")
      ("growth-factor", po::value(&c.loss_scaler.growth_factor)->default_value(2.0), "scale growth factor")
      ("backoff-factor", po::value(&c.loss_scaler.backoff_factor)->default_value(0.5), "scale backoff factor")
      ("growth-interval", po::value(&c.loss_scaler.growth_interval)->default_value(2000), "clean steps per growth")
      ("hysteresis", po::value(&c.loss_scaler.hysteresis)->default_value(1), "overflows tolerated before a backoff")
      ("min-loss-scale", po::value(&c.loss_scaler.min_scale)->default_value(0.0), "floor of the dynamic scale")
      ("max-bad-steps", po::value(&c.max_bad_steps)->default_value(c.max_bad_steps),
       "end the run with an error after this many consecutive steps skipped for non-finite gradients (0: never)");

  po::options_description bench("Benchmark");
  bench.add_options()
      ("bench", po::bool_switch(&out.bench.enabled),
       "time the training step on random data of the model's shape (one resident batch) and print one JSON line")
      ("bench-warmup", po::value(&out.bench.warmup_steps)->default_value(out.bench.warmup_steps), "untimed steps first")
      ("bench-steps", po::value(&out.bench.timed_steps)->default_value(out.bench.timed_steps), "timed steps")
      ("peak-tflops", po::value(&out.bench.peak_tflops)->default_value(0.0),
       "the device's FP16 peak for MFU (0: by GPU name; CPU: none unless given)");

  std::string inject_steps;
  std::string trace_steps;
  po::options_description faults("Fault injection (testing)");
  faults.add_options()
      ("inject-overflow", po::value(&inject_steps), "make these 1-based steps' gradients Inf: STEP[,STEP...]")
      ("inject-overflow-every", po::value(&c.inject_overflow_every)->default_value(0), "and every K-th step (0: off)")
      ("inject-overflow-rank", po::value(&c.inject_overflow_rank)->default_value(0), "the rank whose gradients overflow")
      ("stall-at-step", po::value(&c.stall_at_step)->default_value(0),
       "make --stall-rank sleep forever before this 1-based step's collectives (0: off)")
      ("stall-rank", po::value(&c.stall_rank)->default_value(0), "the rank that stalls");

  po::options_description output("Output and checkpoints");
  output.add_options()
      ("metrics", po::value(&c.metrics_path), "JSON Lines metrics file")
      ("trace", po::value(&c.trace_path),
       "each rank's timeline (layers' forward/backward, each bucket's collective, optimizer) as Chrome trace JSON "
       "(Perfetto, chrome://tracing) in FILE with the rank inserted: run.json -> run.rank0.json; merge the ranks' "
       "files with launch/merge_traces.py")
      ("trace-steps", po::value(&trace_steps)->default_value("1:20"), "--trace: the global steps A:B to trace")
      ("log-every", po::value(&c.log_every)->default_value(c.log_every), "steps per log line / step record")
      ("eval-every", po::value(&c.eval_every)->default_value(0),
       "also evaluate the test (validation) split every N optimizer steps (0: at epoch ends and at the end only)")
      ("sample-every", po::value(&c.sample_every)->default_value(0),
       "--model gpt on bytes: every N optimizer steps rank 0 prints a sample from the current weights, after "
       "--prompt (default a newline), temperature 0.8 and top-k 40 unless given, seed --seed + step (0: off)")
      ("sample-length", po::value(&c.sample_length)->default_value(c.sample_length),
       "--sample-every: bytes per sample")
      ("checkpoint-dir", po::value(&c.checkpoint_dir), "directory for checkpoints")
      ("checkpoint-every", po::value(&c.checkpoint_every)->default_value(0), "steps between checkpoints (0: at the end only)")
      ("keep-checkpoints", po::value(&c.keep_checkpoints)->default_value(0), "keep the K newest (0: all)")
      ("resume", po::value(&c.resume_path)->implicit_value(""), "resume from PATH, or bare: the newest valid in --checkpoint-dir")
      ("save-weights", po::value(&c.save_weights_dir),
       "at the end, write the FP32 weights: PATH.safetensors one file under PyTorch state_dict names, else a "
       "directory of layer<i>.{weight,bias}.npy")
      ("init-weights", po::value(&c.init_weights_dir),
       "start from PATH.safetensors (F32, F16 or BF16 tensors under the state_dict names) or a directory of "
       "layer<i>.{weight,bias}.npy")
      ("predict", po::value(&c.predict_path), "run inference of the starting weights on every row of this [N, D] .npy")
      ("predictions", po::value(&c.predictions_path), "where --predict writes its outputs (.npy, gathered on rank 0)")
      ("predict-output", po::value(&c.predict_output),
       "logits | probs | class (default: class for --loss xent, logits for mse)")
      ("generate", po::value(&c.generate_bytes),
       "--model gpt: print N bytes sampled after --prompt from the --resume checkpoint (its shape) or the "
       "--init-weights (the shape flags'), to stdout alone; trains nothing")
      ("prompt", po::value(&c.prompt), "--generate, --sample-every: the text to continue (1 to --block-size bytes)")
      ("temperature", po::value(&c.temperature)->default_value(c.temperature),
       "--generate, --sample-every: divide the logits by T before the softmax (0: greedy argmax; "
       "--sample-every's default is 0.8)")
      ("top-k", po::value(&c.top_k)->default_value(c.top_k),
       "--generate, --sample-every: sample among the K likeliest bytes (0: all; --sample-every's default is 40)")
      ("eval-only", po::bool_switch(&c.eval_only),
       "evaluate the --resume checkpoint or the --init-weights on the test set (sharded over the ranks), train nothing");

  po::options_description all(
      "ddp_train: data-parallel FP16 training of an MLP or a GPT, with dynamic loss scaling and ZeRO\n\n"
      "Usage: [mpirun -np N] ddp_train [options]\n");
  all.add(general).add(data).add(model).add(gpt).add(optim).add(scaling).add(output).add(bench).add(faults);

  po::variables_map vm;
  try {
    // No positional arguments: a stray word (a value without its flag, a
    // second value) is an error naming it. Collected under a hidden name so
    // the message can quote it; --help does not list it.
    std::vector<std::string> stray;
    po::options_description parsed;
    parsed.add(all).add_options()("stray-words", po::value(&stray));
    po::positional_options_description every_word;
    every_word.add("stray-words", -1);
    po::store(po::command_line_parser(argc, argv).options(parsed).positional(every_word).run(), vm);
    if (!stray.empty() || vm.count("stray-words"))
      throw Error("unexpected argument '" + vm["stray-words"].as<std::vector<std::string>>().front() +
                  "': every option is --name value (see --help)");
    for (const auto& [name, value] : vm)
      if (!value.defaulted()) c.command_line_flags.insert(name);
    if (vm.count("config")) {
      const std::string path = vm["config"].as<std::string>();
      if (path.empty()) throw Error("--config: the path is empty");
      std::istringstream in(read_config_text(path));
      // Unknown keys are errors (allow_unregistered = false).
      const po::parsed_options from_file = po::parse_config_file(in, all, false);
      // One level only: a config that names another would be silently ignored.
      for (const po::option& o : from_file.options)
        if (o.string_key == "config")
          throw Error("--config " + path + ": a config file cannot name another config file (config = ...)");
      po::store(from_file, vm);  // stored second: the command line wins
    }
    po::notify(vm);
  } catch (po::error_with_option_name& e) {
    defuse_placeholders(e);
    throw Error(std::string(e.what()) + " (see --help)");
  } catch (const po::error& e) {
    throw Error(std::string(e.what()) + " (see --help)");
  }
  std::ostringstream help;
  help << all;
  out.help_text = help.str();
  out.show_help = vm.count("help") > 0;
  if (out.show_help) return out;
  for (const auto& [name, value] : vm)
    if (!value.defaulted()) c.given_flags.insert(name);
  c.config_path = config_file;

  c.seed = static_cast<uint64_t>(seed);
  c.shuffle = !vm["no-shuffle"].as<bool>();
  c.prefetch_batches = !vm["no-prefetch"].as<bool>();
  c.resume = vm.count("resume") > 0;
  if (c.data.kind == "synthetic") {  // the seed problem: Linear(10,10) regression
    if (vm["layers"].defaulted()) layers = "10,10";
    if (vm["loss"].defaulted()) loss = "mse";
  }
  set_mlp_options(c.mlp, layers, activation);
  model_row(c.model);  // throws naming the models there are
  if (c.model == "gpt") {
    require_positive(c.gpt.n_layer, "--n-layer");
    require_positive(c.gpt.n_head, "--n-head");
    require_positive(c.gpt.n_embd, "--n-embd");
    if (c.gpt.n_embd % c.gpt.n_head != 0)
      throw Error("--n-embd " + std::to_string(c.gpt.n_embd) + " does not divide by --n-head " +
                  std::to_string(c.gpt.n_head) + " (each head is n_embd / n_head wide)");
    // --generate reads no data: the shape comes from its checkpoint or the
    // flags. Its own flags without it are refused later, naming it.
    const bool generation_flags = vm.count("generate") || vm.count("prompt") || !vm["temperature"].defaulted() ||
                                  !vm["top-k"].defaulted();
    // --bench draws random token windows of the flags' shape instead.
    if (c.data.kind != "text" && !generation_flags && !out.bench.enabled)
      throw Error("--model gpt needs --data text (token windows) or --bench; --data is " + c.data.kind);
    if (vm["loss"].defaulted()) loss = "xent";
    if (loss != "xent") throw Error("--model gpt: --loss must be xent (the next token's cross-entropy)");
    c.gpt.block_size = static_cast<int>(c.data.block_size);
  }
  if (loss == "xent") c.loss = LossKind::SoftmaxCrossEntropy;
  else if (loss == "mse") c.loss = LossKind::MeanSquaredError;
  else throw Error("--loss: '" + loss + "' is not one of xent, mse");
  c.loss_name = loss;
  c.lr_schedule = parse_lr_schedule(schedule);
  c.lr_scaling = parse_lr_scaling(lr_scaling);
  c.optimizer = parse_optimizer_kind(optimizer);
  parse_loss_scale_mode(loss_scale, c.loss_scaler);
  if (out.bench.warmup_steps < 0) throw Error("--bench-warmup must be >= 0");
  require_positive(out.bench.timed_steps, "--bench-steps");
  require_non_negative(out.bench.peak_tflops, "--peak-tflops");
  if (!vm["global-batch"].defaulted() && !vm["batch-size"].defaulted())
    throw Error("--batch-size and --global-batch are exclusive: give one");
  if (!inject_steps.empty()) c.inject_overflow_steps = parse_step_list(inject_steps, "--inject-overflow");
  {
    const TraceWindow w = parse_trace_window(trace_steps);
    c.trace_first = w.first, c.trace_last = w.last;
  }
  if (!c.resume_path.empty() && !c.resume) c.resume = true;
  // Which flags were given where first (the command line drops a config
  // file's flag it overrides), then the values of the config that results:
  // the check the Trainer makes of a config built in code.
  check_flags_as_a_whole(c, out.bench);
  check_train_config(c);
  return out;
}

}  // namespace ddp
