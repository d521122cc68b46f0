// ddp_train_main.cpp: the `ddp_train` entry point.
//
//   comm/mpi_environment.h      rank, world, local rank, host (a world of one without mpirun)
//   comm/mpi_communicator.h     FP16 gradient sums over MPI (CPU ranks)
//   comm/nccl_communicator.h    FP16 gradient sums over NCCL (GPU ranks, a world of one included)
//   comm/collective_watchdog.h  a collective that waits past --collective-timeout ends the job
//   launch/cli/options.h        command line + INI config -> TrainConfig
//   launch/cli/device_select.h  --device -> CpuBackend / CudaBackend (device = local rank)
//   launch/cli/run_settings.h   the effective configuration every rank compares with rank 0's at start-up
//   launch/bench/bench_report.h --bench: the timed steps' JSON line
//   trainer/data/data_source.h  --data -> train and test sets
//   trainer/config/model_catalog.h  the configured model's widths and FLOPs (--bench's data and line)
//   trainer/modes/generation.h  --generate: text sampled from a GPT's checkpoint or weights, no Trainer
//   trainer/modes/inference.h   --predict: batched inference of saved weights, no Trainer
//   trainer/loop/trainer.h      the training loop (model, loss scaling, SGD, eval, checkpoints)
//   trainer/loop/stop_signal.h  SIGINT/SIGTERM: exit at once in start-up, else stop at a step
//                               boundary with a checkpoint
#include <csignal>
#include <cstdio>
#include <exception>
#include <memory>

#include "comm/collective_watchdog.h"
#include "comm/communicator.h"
#include "comm/mpi_environment.h"
#include "kernels/error.h"
#include "launch/bench/bench_report.h"
#include "launch/cli/device_select.h"
#include "launch/cli/options.h"
#include "launch/cli/run_settings.h"
#include "trainer/config/config_check.h"
#include "trainer/modes/generation.h"
#include "trainer/modes/inference.h"
#include "trainer/config/model_catalog.h"
#include "trainer/config/rank_agreement.h"
#include "trainer/loop/stop_signal.h"
#include "trainer/data/synthetic_data.h"
#include "trainer/data/token_files.h"
#include "trainer/loop/trainer.h"
#if defined(DDP_HAVE_MPI)
#include "comm/mpi_communicator.h"
#endif
#if defined(DDP_HAVE_NCCL)
#include "comm/nccl_communicator.h"
#include "kernels/cuda/cuda_backend.h"
#endif

namespace {

// --bench trains on one step's worth of random samples per rank, in a fixed
// order, so the batch stays resident on the device (as a peer benchmark's
// tensors do) and the step alone is timed.
void prepare_bench_config(ddp::TrainConfig& c, const ddp::BenchOptions& b) {
  c.shuffle = false;
  c.steps = b.warmup_steps + b.timed_steps;
  c.stop_after_steps = 0;
  c.metrics_path.clear();
  c.checkpoint_dir.clear();
  c.save_weights_dir.clear();
  c.resume = false;
}

// A model that reads tokens (the GPT) gets token windows of --block-size
// uniform ids below --vocab-size (bytes' 256 when not given: there is no
// data to take it from).
ddp::TrainTestData bench_data(const ddp::TrainConfig& c, int world_size) {
  const size_t count = static_cast<size_t>(ddp::resolve_batch_per_rank(c, world_size) * c.grad_accum * world_size);
  const bool classification = c.loss == ddp::LossKind::SoftmaxCrossEntropy;
  ddp::TrainTestData d;
  if (ddp::model_reads_tokens(c)) {
    const auto t = static_cast<size_t>(c.data.block_size);
    const int vocab = c.data.vocab_size > 0 ? static_cast<int>(c.data.vocab_size) : ddp::kByteVocabSize;
    d.train = ddp::make_random_token_windows(c.seed, count, t, vocab);
    d.test = ddp::make_random_token_windows(c.seed + 1, 1, t, vocab);
    return d;
  }
  const int64_t in = ddp::model_input_width(c), out = ddp::model_output_width(c);
  d.train = ddp::make_random_dataset(c.seed, count, in, out, classification);
  d.test = ddp::make_random_dataset(c.seed + 1, 1, in, out, classification);
  return d;
}

// GPU ranks talk over NCCL whenever it is built, even alone, so one GPU runs
// the same path as many. MPI moves host memory only, so GPU ranks without
// NCCL can train only as a world of one. `shard_size`: the ranks of a
// --zero shard group (resolve_zero_shard_size; 0: the world).
std::unique_ptr<ddp::Communicator> make_communicator(const ddp::MpiEnvironment& env, ddp::Backend& backend,
                                                     int shard_size = 0) {
#if defined(DDP_HAVE_NCCL)
  if (backend.kind() == ddp::DeviceKind::Cuda) {
    auto* cuda = dynamic_cast<ddp::CudaBackend*>(&backend);
    DDP_REQUIRE(cuda != nullptr, "a backend of kind Cuda that is not a CudaBackend");
    return std::make_unique<ddp::NcclCommunicator>(env.rank(), env.world_size(), cuda->compute_stream(), shard_size,
                                                   backend.precision());
  }
#endif
  // The backend makes the sharded collectives' copies (--zero at one rank).
  if (env.world_size() == 1) return std::make_unique<ddp::SingleProcessCommunicator>(&backend);
#if defined(DDP_HAVE_MPI)
  if (backend.kind() == ddp::DeviceKind::Cpu)
    return std::make_unique<ddp::MpiCommunicator>(MPI_COMM_WORLD, shard_size, backend.precision());
#endif
  throw ddp::Error(
      "multi-rank training on GPUs needs NCCL, and this build has none (see the 'ddp_train: NCCL' "
      "line of the CMake configure); use --device cpu or one rank per job");
}

// Peers exist only in a world above one; without them nothing can stall.
std::unique_ptr<ddp::CollectiveWatchdog> make_watchdog(const ddp::TrainConfig& c, const ddp::MpiEnvironment& env,
                                                       ddp::Communicator& comm) {
  if (env.world_size() == 1 || !(c.collective_timeout_s > 0)) return nullptr;
  return std::make_unique<ddp::CollectiveWatchdog>(c.collective_timeout_s, [&env, &comm](const std::string& message) {
    std::fflush(stdout);
    std::fprintf(stderr, "ddp_train: error (rank %d on %s): %s\n", env.rank(), env.host().c_str(), message.c_str());
    std::fflush(stderr);
#if defined(DDP_HAVE_NCCL)
    // Ends the NCCL kernels that wait for the missing peer before the job goes.
    // Returns within about a second even when this rank's main thread is
    // stuck inside an NCCL call (NcclCommunicator::abort), so MPI_Abort runs.
    if (auto* nccl = dynamic_cast<ddp::NcclCommunicator*>(&comm)) nccl->abort();
#else
    (void)comm;
#endif
    env.abort_job(1);
  });
}

// Every rank's flags, input files and device kind against rank 0's, in one
// all-gather before anything else is collective: ranks started differently
// stop together with one line naming the setting, instead of crashing,
// hanging or training silently wrong. A world of one has no one to differ.
void agree_across_ranks(const ddp::ParsedOptions& opts, const ddp::MpiEnvironment& env) {
  if (env.world_size() == 1) return;
  const std::vector<ddp::Setting> settings = ddp::run_settings(opts);
  const std::vector<uint64_t> gathered =
      env.allgather_words(ddp::agreement_record(settings), opts.config.collective_timeout_s);
  const std::string problem = ddp::find_disagreement(settings, gathered, env.world_size());
  if (!problem.empty()) throw ddp::AgreedError(problem);
}

// --predict: no data set, no Trainer; the model, its weights, X's rows.
int predict(const ddp::TrainConfig& config, const ddp::MpiEnvironment& env) {
  const std::string note = ddp::check_prediction_files(config);
  ddp::DeviceChoice device = ddp::select_device(config.device, env.local_rank(), env.local_size(), config.threads,
                                                env.host(), config.precision);
  std::unique_ptr<ddp::Communicator> comm = make_communicator(env, *device.backend);
  if (env.rank() == 0) {
    std::printf("%s\n", device.notice.c_str());
    if (!note.empty()) std::printf("%s\n", note.c_str());
  }
  ddp::run_prediction(config, *device.backend, *comm);
  return 0;
}

// --generate: one process samples one text, so rank 0 alone runs it; the
// other ranks of an mpirun have nothing to do and end at once (exit 0).
// stdout carries the generated bytes alone: every other line goes to stderr.
int generate(const ddp::TrainConfig& config, const ddp::MpiEnvironment& env) {
  if (env.rank() != 0) return 0;
  const ddp::GenerationPlan plan = ddp::plan_generation(config);
  ddp::DeviceChoice device = ddp::select_device(config.device, env.local_rank(), env.local_size(), config.threads,
                                                env.host(), config.precision);
  std::fprintf(stderr, "%s\n", device.notice.c_str());
  if (env.world_size() > 1)
    std::fprintf(stderr, "generate: rank 0 samples; ranks 1 to %d have ended\n", env.world_size() - 1);
  ddp::run_generation(plan, *device.backend, stdout, stderr);
  return 0;
}

// --check-worlds: the config at each world size, one line each from rank 0:
// the start-up check, and the per-rank batch training resolves from it.
int check_worlds(const ddp::ParsedOptions& opts, const ddp::MpiEnvironment& env) {
  bool all_ok = true;
  for (const int64_t world : opts.check_worlds) {
    std::string verdict = "ok";
    try {
      ddp::check_config_for_world(opts.config, static_cast<int>(world));
      ddp::resolve_batch_per_rank(opts.config, static_cast<int>(world));
    } catch (const ddp::Error& e) {
      verdict = std::string("refused: ") + e.what();
      all_ok = false;
    }
    if (env.rank() == 0) std::printf("world %lld: %s\n", static_cast<long long>(world), verdict.c_str());
  }
  return all_ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::unique_ptr<ddp::MpiEnvironment> env;
  // Before MPI_Init, which can take a while, so a signal during it ends the
  // process with 128 + its number and a line (phase StartUp, until the
  // training loop begins); again after it, so these handlers are the ones
  // in place.
  ddp::install_stop_signal_handlers();
  try {
    env = std::make_unique<ddp::MpiEnvironment>(&argc, &argv);
    ddp::install_stop_signal_handlers();
    // A reader of stdout that goes away (`ddp_train | head`) must not end the
    // run without its checkpoint: progress lines then fail quietly instead.
    std::signal(SIGPIPE, SIG_IGN);
    ddp::ParsedOptions opts = ddp::parse_options(argc, argv);
    if (opts.show_help) {
      if (env->rank() == 0) std::printf("%s", opts.help_text.c_str());
      return 0;
    }
    if (!opts.check_worlds.empty()) return check_worlds(opts, *env);
    // Everything that can reject the input (flags, data, model shape,
    // checkpoint) runs before any output file is opened.
    ddp::check_config_for_world(opts.config, env->world_size());
    agree_across_ranks(opts, *env);
    if (!opts.config.predict_path.empty()) return predict(opts.config, *env);
    if (opts.config.generate_tokens != 0) return generate(opts.config, *env);
    if (opts.bench.enabled) prepare_bench_config(opts.config, opts.bench);
    ddp::TrainTestData data = opts.bench.enabled ? bench_data(opts.config, env->world_size())
                                                 : ddp::load_train_test(opts.config.data, opts.config.seed);
    // The GPT's vocabulary and context come from the data: the bench's line reads them.
    const ddp::TrainConfig bound = ddp::bind_model_to_data(opts.config, data);
    ddp::check_model_matches_data(bound, data);
    ddp::DeviceChoice device = ddp::select_device(opts.config.device, env->local_rank(), env->local_size(),
                                                  opts.config.threads, env->host(), opts.config.precision);
    const int shard_size = ddp::resolve_zero_shard_size(opts.config, env->world_size(), env->node_block_size());
    std::unique_ptr<ddp::Communicator> comm = make_communicator(*env, *device.backend, shard_size);
    // --bench keeps stdout for its JSON line alone.
    if (env->rank() == 0) std::fprintf(opts.bench.enabled ? stderr : stdout, "%s\n", device.notice.c_str());
    // A default that shards over less than the world is said once: it holds
    // world/G times the sharded state a whole-world shard would.
    if (env->rank() == 0 && opts.config.zero_shard_size == 0 && shard_size < env->world_size())
      std::fprintf(opts.bench.enabled ? stderr : stdout,
                   "--zero %d: sharded within each node's %d ranks and replicated across the %d nodes (hybrid, the "
                   "default where nodes hold equal blocks of ranks); --zero-shard-size %d shards over all ranks\n",
                   opts.config.zero_stage, shard_size, env->world_size() / shard_size, env->world_size());
    if (env->rank() == 0 && opts.config.precision == ddp::Precision::Bf16 &&
        opts.config.loss_scaler.mode == ddp::LossScaleMode::Dynamic)
      std::fprintf(opts.bench.enabled ? stderr : stdout,
                   "--precision bf16 with --loss-scale dynamic: scaling the loss as asked (bf16 has FP32's range "
                   "and trains without it by default)\n");
    if (env->rank() == 0 && opts.config.grad_reduce_fp32 && env->world_size() > 1)
      std::fprintf(opts.bench.enabled ? stderr : stdout,
                   "--grad-reduce-dtype fp32: the gradients are widened and summed over the %d ranks in FP32 (twice "
                   "the bytes of %s sums)\n",
                   env->world_size(), ddp::precision_name(opts.config.precision));
    std::fflush(stdout);  // a signal in start-up ends the process without flushing
    // Declared after comm and before the trainer: it stops before either goes.
    std::unique_ptr<ddp::CollectiveWatchdog> watchdog = make_watchdog(opts.config, *env, *comm);
    ddp::Trainer trainer(opts.config, *device.backend, *comm, std::move(data));
    trainer.watch_collectives(watchdog.get());
    trainer.prepare();
    if (opts.config.eval_only) {
      trainer.evaluate();
      return 0;
    }
    if (!opts.bench.enabled) {
      const ddp::TrainSummary summary = trainer.run();
      // As a shell reports a process a signal ended: 128 + its number.
      return summary.stop_signal != 0 ? 128 + summary.stop_signal : 0;
    }
    ddp::set_stop_signal_phase(ddp::StopSignalPhase::Bench);  // nothing to save: a signal ends it at once
    const ddp::BenchTimings timings = trainer.bench(opts.bench.warmup_steps, opts.bench.timed_steps);
    if (env->rank() == 0) {
      ddp::BenchContext context;
      context.model = ddp::model_shape_text(bound);
      context.flops_per_sample = ddp::model_flops_per_sample(bound);
      context.tokens_per_sample = ddp::model_tokens_per_sample(bound);
      context.device = device.backend->description();
      context.world_size = env->world_size();
      context.batch_per_rank = ddp::resolve_batch_per_rank(opts.config, env->world_size());
      context.grad_accum = opts.config.grad_accum;
      context.warmup_steps = opts.bench.warmup_steps;
      context.peak_tflops = opts.bench.peak_tflops;
      std::printf("%s\n", ddp::bench_json_line(context, timings).c_str());
    }
    return 0;
  } catch (const ddp::AgreedError& e) {
    // Every rank stops here at the same step: one line, and a clean exit.
    std::fflush(stdout);
    if (env->rank() == 0) std::fprintf(stderr, "ddp_train: error (rank 0 on %s): %s\n", env->host().c_str(), e.what());
    std::fflush(stderr);
    return 1;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    const int rank = env ? env->rank() : 0;
    const std::string host = env ? env->host() : "?";
    std::fprintf(stderr, "ddp_train: error (rank %d on %s): %s\n", rank, host.c_str(), e.what());
    std::fflush(stderr);
    // A failing rank takes the whole job down: no peer is left in a collective.
    if (env && env->world_size() > 1) env->abort_job(1);
    return 1;
  }
}
