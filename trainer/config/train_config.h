// train_config.h: everything the command line (launch/options.cpp) decides,
// as plain data the trainer reads. Defaults are the README's main job.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "kernels/elementwise_math.h"
#include "kernels/lowp_codec.h"
#include "trainer/data/data_config.h"
#include "trainer/models/gpt/gpt_config.h"
#include "trainer/models/loss_kind.h"
#include "trainer/models/mlp/mlp_config.h"
#include "trainer/optim/loss_scaler.h"
#include "trainer/optim/lr_scaling.h"
#include "trainer/optim/lr_schedule.h"
#include "trainer/optim/optimizer_kind.h"

namespace ddp {

// Bounds of --block-size and --vocab-size (config_check.cpp says why).
constexpr int64_t kMaxBlockSize = int64_t{1} << 20;
constexpr int64_t kMaxVocabSize = int64_t{1} << 24;
constexpr int64_t kMaxSampleTokens = int64_t{1} << 20;  // --sample-length

struct TrainConfig {
  std::string config_path;                   // --config file, if any (an input: never written)
  std::set<std::string> given_flags;         // flags set on the command line or in the config, not defaulted
  std::set<std::string> command_line_flags;  // those of them set on the command line (it wins over the config)
  std::string device = "auto";               // auto | cuda | cpu
  Precision precision = Precision::Fp16;     // --precision: the working 16-bit weights, activations, gradients
  bool grad_reduce_fp32 = false;             // --grad-reduce-dtype fp32: gradients summed over ranks in FP32
  DataConfig data;

  std::string model = "mlp";  // --model mlp | gpt (config/model_factory.h maps it)
  MlpConfig mlp;
  GptConfig gpt;  // its vocabulary and context are bound to the data (model_catalog.h: bind_model_to_data)
  LossKind loss = LossKind::SoftmaxCrossEntropy;
  std::string loss_name = "xent";

  int64_t batch_size = 128;     // per rank and micro-batch
  int64_t global_batch = 0;     // > 0: replaces batch_size by global_batch / (world x grad_accum)
  int64_t grad_accum = 1;       // micro-batches per optimizer step (all-reduce after the last only)
  bool cuda_graph = false;      // replay steady steps from a CUDA graph capture
  double grad_predivide = 1.0;  // gradients divided by this before the all-reduce, by world/this after
  int zero_stage = 0;     // ZeRO: 0 replicated; 1 masters and optimizer state sharded; 2 + FP16 grads; 3 + FP16 weights
  int zero_prefetch = 1;  // stage 3: layer gathers started ahead of the layer that reads them (layer_shards.h)
  int zero_shard_size = 0;  // --zero >= 1: ranks per shard group (hybrid sharding); 0: a node (resolve_zero_shard_size)
  double bucket_mb = 25.0;  // all-reduce bucket size (MiB); 0: one all-reduce after backward
  double first_bucket_mb = 1.0;  // the first (last layers') bucket: small, so communication starts early
  int64_t epochs = 15;
  int64_t steps = 0;             // > 0 replaces epochs
  int64_t stop_after_steps = 0;  // > 0: end this run after that many iterations (resume continues)
  uint64_t seed = 0;
  bool shuffle = true;
  bool drop_last = false;
  int threads = 0;               // CPU compute threads per rank; 0 = cores / local ranks
  bool prefetch_batches = true;  // gather and copy the next batch while the device computes this one

  OptimizerKind optimizer = OptimizerKind::Sgd;
  double lr = 0.05;
  double momentum = 0.9;  // SGD
  bool nesterov = false;
  double beta1 = 0.9;  // AdamW (torch.optim.AdamW's defaults)
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;  // SGD: L2 on every tensor; AdamW: decoupled, on the tensors marked to decay
  LrScheduleKind lr_schedule = LrScheduleKind::Cosine;
  // --lr-scaling with --base-batch: lr is the rate for global batch
  // base_batch, scaled to the run's global batch (optim/lr_scaling.h).
  LrScaling lr_scaling = LrScaling::None;
  int64_t base_batch = 0;
  int64_t warmup_steps = 0;
  int64_t lr_step_size = 0;
  double lr_gamma = 0.1;
  double clip_grad_norm = 0.0;  // 0 = no clipping

  LossScalerConfig loss_scaler;
  int64_t max_bad_steps = 100;  // > 0: this many skipped (non-finite) steps in a row end the run with an error

  double collective_timeout_s = 600.0;  // > 0: a collective waiting longer ends the job (watchdog)

  std::string metrics_path;
  // --trace FILE: each rank's timeline of steps [trace_first, trace_last]
  // (1-based) as Chrome trace-event JSON (report/step_trace.h); "": off.
  std::string trace_path;
  int64_t trace_first = 1, trace_last = 20;
  int64_t log_every = 50;
  // --eval-every N: also evaluate the test (validation) split after every
  // N-th optimizer step (step % N == 0, the global step: a resumed run keeps
  // the schedule); 0: at epoch ends and at the end only.
  int64_t eval_every = 0;
  // --sample-every N (a GPT): after every N-th step rank 0 prints
  // sample_length tokens sampled after the prompt (a default without --prompt)
  // from the FP16 weights, seeded by seed + step (trainer/modes/training_sampler.h).
  int64_t sample_every = 0;
  int64_t sample_length = 200;
  std::string checkpoint_dir;
  int64_t checkpoint_every = 0;  // 0 = only at the end
  int keep_checkpoints = 0;      // 0 = keep all
  // --async-checkpoint: the state is copied to host memory at the step
  // boundary and rank 0 writes the file on a background thread while
  // training goes on (trainer/checkpoint/async_checkpoint_writer.h).
  bool async_checkpoint = false;
  bool resume = false;
  std::string resume_path;  // empty with resume = newest valid in checkpoint_dir
  std::string save_weights_dir;
  // --overwrite: an existing output file that ddp_train did not write
  // (trainer/io/output_registry.h) may be replaced; without it, refused.
  bool overwrite = false;
  std::string init_weights_dir;
  // What the --init-weights said of the model (Hugging Face GPT-2: its shape,
  // its dropout not applied), for the log; set while the flags are read.
  std::string init_weights_note;
  // --weights-format auto | hf: --save-weights by its path (auto), or a
  // Hugging Face GPT-2 directory (config.json + model.safetensors).
  std::string weights_format = "auto";
  // --save-weights-dtype fp32 | fp16 | bf16: the safetensors forms' dtype
  // (trainer/checkpoint/weights_dtype.h); a .npy directory is fp32 only.
  std::string save_weights_dtype = "fp32";
  // --eval-only: evaluate the starting weights (a --resume checkpoint or
  // --init-weights) on the test set; trains nothing, writes nothing but --metrics.
  bool eval_only = false;
  // --predict X.npy --predictions OUT.npy: inference of the starting weights
  // on X's rows (trainer/modes/inference.h); --predict-output logits|probs|class
  // ("" until parse_options picks: class for xent, logits for mse).
  std::string predict_path;
  std::string predictions_path;
  std::string predict_output;
  // --generate N --prompt TEXT: N tokens sampled from a GPT after the
  // prompt (trainer/modes/generation.h); 0: off. --temperature 0 is greedy;
  // --top-k 0 keeps every class. The sampling RNG is seeded by --seed.
  int64_t generate_tokens = 0;
  // --kv-cache on|off: --generate and --sample-every keep each layer's keys
  // and values (models/gpt/gpt_decoder.h), one position's forward per token;
  // off runs the whole window for every token (the reference path).
  bool kv_cache = true;
  // --generate-logits PATH.npy: each drawn token's FP32 logits (the real
  // classes), [N, real_vocab], to compare with another implementation.
  std::string generate_logits_path;
  std::string prompt;
  double temperature = 1.0;
  int64_t top_k = 0;
  // The model's tokenizer (tokenizer/tokenizer_kind.h): --tokenizer, else the
  // data's (bind_model_to_data) or the weights' record; "" unknown. GPT-2's
  // ranks file for encoding and decoding its tokens (--gpt2-ranks).
  std::string tokenizer;
  std::string gpt2_ranks_path = "data/gpt2.tiktoken";

  // Test hooks (fault injection): make the gradients of these 1-based steps
  // non-finite on one rank, after backward and before the all-reduce.
  std::vector<int64_t> inject_overflow_steps;
  int64_t inject_overflow_every = 0;  // > 0: every K-th step as well
  int inject_overflow_rank = 0;
  // Test hook: rank stall_rank sleeps forever before the collectives of the
  // 1-based step stall_at_step (0: off), as a hung peer would.
  int stall_rank = 0;
  int64_t stall_at_step = 0;
};

// Whether the values make sense (and fit a world size) is
// trainer/config/config_check.h.

// Per-rank batch from --global-batch (or --batch-size as given); throws
// naming the flag when the global batch does not divide by world x accum.
int64_t resolve_batch_per_rank(const TrainConfig& config, int world_size);

// The ranks of a shard group (Communicator::shard_size): the whole world at
// --zero 0; --zero-shard-size when given; otherwise one node's ranks
// (`node_block_size`: MpiEnvironment's, 0 where the nodes are not equal
// blocks of consecutive ranks) when there are two or more and they divide
// the world, else the world.
// Throws naming the flag when a given size does not divide the world.
int resolve_zero_shard_size(const TrainConfig& config, int world_size, int node_block_size);

// --precision's text ("fp16", "bf16"); throws naming the flag otherwise.
Precision parse_precision(const std::string& text);
// --grad-reduce-dtype's text: true for "fp32", false for the working
// precision's name (`precision`: its 16-bit sums); throws naming the flag
// otherwise (FP16 gradients are not summed in BF16, nor BF16 in FP16).
bool parse_grad_reduce_fp32(const std::string& text, Precision precision);

}  // namespace ddp
