// flags_optimisation.cpp: the optimisation and loss-scaling flags
// (trainer/optim/: the optimizer, LR schedule and scaling, loss scaler
// they configure).
#include "launch/cli/flag_groups.h"

#include "kernels/error.h"
#include "trainer/optim/loss_scaler.h"
#include "trainer/optim/lr_scaling.h"
#include "trainer/optim/lr_schedule.h"
#include "trainer/optim/optimizer_kind.h"

namespace po = boost::program_options;

namespace ddp {

po::options_description optimisation_flags(TrainConfig& c, FlagText& t) {
  po::options_description optim("Optimisation");
  // One flag per row, as --help lists them.
  // clang-format off
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
      ("zero-prefetch", po::value(&c.zero_prefetch)->default_value(c.zero_prefetch),
       "--zero 3: the layer gathers started ahead of the layer that reads them, in forward then backward order, "
       "so they run while the layers before them compute (N + 1 gather slots, at least 2; 0: each layer's gather "
       "waits at its own hook; the same bits at every N)")
      ("zero-shard-size", po::value(&c.zero_shard_size)->default_value(c.zero_shard_size),
       "--zero 1-3, hybrid sharding (FSDP's HSDP): the state is sharded within groups of G consecutive ranks and "
       "replicated across the groups; gradients are reduce-scattered within a group, then all-reduced across "
       "groups. G must divide the world (0: the ranks of one node, when every node holds as many (two or more) "
       "consecutive ranks, said at start-up; otherwise the whole world. FSDP's default is the whole world: give "
       "--zero-shard-size N for it)")
      ("epochs", po::value(&c.epochs)->default_value(c.epochs), "passes over the training set")
      ("steps", po::value(&c.steps)->default_value(0), "iterations to run instead of --epochs (0: use --epochs)")
      ("stop-after-steps", po::value(&c.stop_after_steps)->default_value(0),
       "end this run after N iterations, with a checkpoint (e.g. to fit a scheduler slot); --resume continues")
      ("seed", po::value(&t.seed)->default_value(0), "seed for initialisation and shuffling (>= 0)")
      ("optimizer", po::value(&t.optimizer)->default_value(t.optimizer),
       "sgd | adamw (torch.optim.AdamW: decoupled weight decay, none on biases)")
      ("lr", po::value(&c.lr)->default_value(c.lr), "base learning rate (AdamW: try 1e-3)")
      ("momentum", po::value(&c.momentum)->default_value(c.momentum), "SGD momentum")
      ("nesterov", po::bool_switch(&c.nesterov), "Nesterov momentum (SGD)")
      ("beta1", po::value(&c.beta1)->default_value(c.beta1), "AdamW: first-moment decay")
      ("beta2", po::value(&c.beta2)->default_value(c.beta2), "AdamW: second-moment decay")
      ("eps", po::value(&c.eps)->default_value(c.eps), "AdamW: added to the denominator")
      ("weight-decay", po::value(&c.weight_decay)->default_value(c.weight_decay),
       "SGD: L2 weight decay on every tensor (torch SGD); AdamW: decoupled decay, weights only")
      ("lr-schedule", po::value(&t.schedule)->default_value(t.schedule), "constant | step | cosine (over all steps)")
      ("lr-scaling", po::value(&t.lr_scaling)->default_value(t.lr_scaling),
       "none | linear | sqrt: --lr is the rate for global batch --base-batch, scaled to this run's global batch "
       "(linear: x G/B, Goyal et al. 2017, with --warmup-steps; sqrt: x sqrt(G/B), common for AdamW)")
      ("base-batch", po::value(&c.base_batch)->default_value(0), "--lr-scaling: the global batch --lr is meant for")
      ("warmup-steps", po::value(&c.warmup_steps)->default_value(c.warmup_steps), "linear warm-up iterations")
      ("lr-step-size", po::value(&c.lr_step_size)->default_value(0), "step schedule: iterations per decay (0: a third)")
      ("lr-gamma", po::value(&c.lr_gamma)->default_value(c.lr_gamma), "step schedule: decay factor")
      ("clip-grad-norm", po::value(&c.clip_grad_norm)->default_value(0.0), "clip the global L2 norm (0: off)");
  // clang-format on
  return optim;
}

po::options_description loss_scaling_flags(TrainConfig& c, FlagText& t) {
  po::options_description scaling("Precision and loss scaling");
  // One flag per row, as --help lists them.
  // clang-format off
  scaling.add_options()
      ("precision", po::value(&t.precision)->default_value(t.precision),
       "fp16 | bf16: the working weights, activations and gradients (and, by default, the gradients' sums); FP32 "
       "accumulation, master weights and optimizer state either way. bf16 has FP32's range: no loss scaling "
       "unless --loss-scale is given (torch.autocast(dtype=torch.bfloat16)); on a GPU, Ampere or newer")
      ("grad-reduce-dtype", po::value(&t.grad_reduce_dtype)->default_value(t.grad_reduce_dtype, "the --precision"),
       "the gradients' sums over ranks: the --precision (16-bit sums, rounded at each step, as NCCL's) or fp32 "
       "(each bucket widened and summed in FP32, the sums kept in FP32 for the optimizer: twice the bytes on the "
       "wire; llm.c's and torchtitan's FP32 reduction)")
      ("loss-scale", po::value(&t.loss_scale)->default_value(t.loss_scale, "dynamic (fp16), none (bf16)"),
       "dynamic | static:<S> | none")
      ("init-scale", po::value(&c.loss_scaler.init_scale)->default_value(65536.0), "initial dynamic scale")
      ("growth-factor", po::value(&c.loss_scaler.growth_factor)->default_value(2.0), "scale growth factor")
      ("backoff-factor", po::value(&c.loss_scaler.backoff_factor)->default_value(0.5), "scale backoff factor")
      ("growth-interval", po::value(&c.loss_scaler.growth_interval)->default_value(2000), "clean steps per growth")
      ("hysteresis", po::value(&c.loss_scaler.hysteresis)->default_value(1), "overflows tolerated before a backoff")
      ("min-loss-scale", po::value(&c.loss_scaler.min_scale)->default_value(0.0), "floor of the dynamic scale")
      ("max-bad-steps", po::value(&c.max_bad_steps)->default_value(c.max_bad_steps),
       "end the run with an error after this many consecutive steps skipped for non-finite gradients (0: never)");
  // clang-format on
  return scaling;
}

void apply_optimisation_flags(const FlagText& t, TrainConfig& c) {
  c.lr_schedule = parse_lr_schedule(t.schedule);
  c.lr_scaling = parse_lr_scaling(t.lr_scaling);
  c.optimizer = parse_optimizer_kind(t.optimizer);
  c.precision = parse_precision(t.precision);
  const bool bf16 = c.precision == Precision::Bf16;
  // Not given: the precision's default (parse_loss_scale_mode refuses an empty given value).
  const bool given = c.given_flags.count("loss-scale") > 0;
  parse_loss_scale_mode(given ? t.loss_scale : (bf16 ? "none" : "dynamic"), c.loss_scaler);
  // Not given: the precision's own sums (an empty given value is refused).
  const bool reduce_given = c.given_flags.count("grad-reduce-dtype") > 0;
  c.grad_reduce_fp32 =
      parse_grad_reduce_fp32(reduce_given ? t.grad_reduce_dtype : precision_name(c.precision), c.precision);
}

void check_batch_flags(const po::variables_map& vm) {
  if (!vm["global-batch"].defaulted() && !vm["batch-size"].defaulted())
    throw Error("--batch-size and --global-batch are exclusive: give one");
}

void check_zero_flags(const po::variables_map& vm) {
  if (!vm["zero-prefetch"].defaulted() && vm["zero"].as<int>() != 3)
    throw Error("--zero-prefetch applies to --zero 3 (the stage that gathers each layer's weights); --zero is " +
                std::to_string(vm["zero"].as<int>()));
  if (vm["zero-shard-size"].as<int>() != 0 && vm["zero"].as<int>() == 0)
    throw Error("--zero-shard-size applies to --zero 1, 2 and 3 (what is sharded); --zero is 0");
}

}  // namespace ddp
