// checkpointing.cpp: resume, restore, snapshot and checkpoint writes of the
// trainer (checkpointing.h), synchronous or on the background writer.
#include "trainer/loop/checkpointing.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <filesystem>
#include <random>
#include <unistd.h>
#include <vector>

#include "kernels/error.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/checkpoint_dir.h"
#include "trainer/params/weights_range.h"
#include "trainer/checkpoint/checkpoint_validation.h"
#include "trainer/config/model_catalog.h"
#include "trainer/loop/run_outputs.h"
#include "trainer/loop/stop_grace.h"
#include "trainer/zero/sharded_state.h"

namespace ddp {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Where a checkpoint goes and what pruning after it needs: copied into a
// background write, which must not read the Checkpointing it came from.
struct CheckpointTarget {
  std::string dir;
  std::string path;
  int keep = 0;
  uint64_t run_id = 0;
  std::vector<int64_t> model_dims;
};

// Rank 0's part of a checkpoint, the same on either thread: the directory,
// the file (atomic_file.h), then the lineage's older files pruned.
void write_and_prune(const CheckpointTarget& target, const TrainState& s, const MidWriteHook& mid_write) {
  std::error_code ec;
  std::filesystem::create_directories(target.dir, ec);
  if (ec) throw Error("--checkpoint-dir: cannot create " + target.dir + ": " + ec.message());
  write_checkpoint_atomic(target.path, s, mid_write);
  prune_checkpoints(target.dir, target.keep, target.run_id, target.model_dims, target.path);
}

}  // namespace

Checkpointing::Checkpointing(const TrainConfig& cfg, const Dataset& train, ParameterStore& params, StepStateView& state,
                             EpochCursor& cursor, Communicator& comm, ProgressReporter& progress, const RunPlan& plan)
    : cfg_(cfg),
      train_(train),
      params_(params),
      state_(state),
      cursor_(cursor),
      comm_(comm),
      progress_(progress),
      plan_(plan),
      data_seed_(cfg.seed),
      write_fault_(checkpoint_write_fault_from_env()) {}

std::string Checkpointing::resolve_resume_path() {
  if (!cfg_.resume_path.empty()) return cfg_.resume_path;
  if (cfg_.checkpoint_dir.empty()) throw Error("--resume without a PATH needs --checkpoint-dir");
  // Training starts from scratch where there is nothing to resume; an
  // evaluation would evaluate random weights, so it refuses, as --predict
  // and --generate do.
  if (!std::filesystem::is_directory(cfg_.checkpoint_dir)) {
    if (cfg_.eval_only) throw Error("--eval-only: no valid checkpoint in " + cfg_.checkpoint_dir + " (it does not exist)");
    say("resume: " + cfg_.checkpoint_dir + " does not exist yet; starting from scratch");
    return "";
  }
  const CheckpointScan scan = find_newest_valid_checkpoint(cfg_.checkpoint_dir);
  for (const auto& [path, why] : scan.skipped) say("resume: skipping " + path + ": " + why);
  if (scan.newest_valid.empty()) {
    if (scan.candidates > 0)
      throw Error("--resume: " + cfg_.checkpoint_dir + " holds " + std::to_string(scan.candidates) +
                  " checkpoint(s) and none is valid");
    if (cfg_.eval_only) throw Error("--eval-only: no valid checkpoint in " + cfg_.checkpoint_dir);
    say("resume: no checkpoint in " + cfg_.checkpoint_dir + "; starting from scratch");
  }
  return scan.newest_valid;
}

ResumeTarget Checkpointing::resume_target() const {
  ResumeTarget t;
  t.world_size = world();
  t.train_samples = train_.count;
  t.epoch_samples = static_cast<int64_t>(cursor_.sampler().samples_per_rank()) * world();
  t.global_batch = global_batch();
  t.total_steps = plan_.total_steps;
  t.loss_scaler = cfg_.loss_scaler;
  t.precision = cfg_.precision;
  t.given_flags = cfg_.given_flags;
  return t;
}

void Checkpointing::check_model_of(const TrainState& s, const std::string& path) const {
  validate_checkpoint_contents(s, path);
  const ParameterRegistry& registry = params_.registry();
  check_checkpoint_model_kind(s, model_kind_name(cfg_), path);
  // Before the shape: a model of another tokenizer differs in its vocabulary too, and this says why.
  check_checkpoint_tokenizer(s, cfg_.tokenizer, path);
  check_checkpoint_compatible(s, model_dims(cfg_), model_activation_name(cfg_), cfg_.loss_name,
                              registry.parameter_count(), path);
  check_checkpoint_tensors(s, registry, path);
  check_weights_fit_precision(s.master_weights_fp32, true, registry, cfg_.precision, path);
}

int64_t Checkpointing::restore(const TrainState& s, const std::string& path) {
  check_model_of(s, path);
  check_checkpoint_optimizer(s, optimizer_kind_name(cfg_.optimizer), path);
  const ParameterRegistry& registry = params_.registry();
  const ResumeTarget target = resume_target();
  std::vector<std::string> notes = check_resume_fits(s, target, path);
  const LossScalerState scaler = resumed_scaler_state(s, target, notes);
  load_state(registry.unpack(s.master_weights_fp32), params_.master_weights_fp32);
  load_state(registry.unpack(s.momentum_fp32), params_.momentum_fp32);
  if (cfg_.optimizer == OptimizerKind::AdamW)
    load_state(registry.unpack(s.second_moment_fp32), params_.second_moment_fp32);
  StepStatus& status = state_.host_to_upload();
  status.momentum_initialized = s.momentum_initialized ? 1 : 0;
  set_scaler_state(status, scaler);
  for (const std::string& line : optimizer_setting_notes(s)) notes.push_back(line);
  for (const std::string& line : notes) say(line);
  resumed_ = true;
  run_id_ = s.run_id;
  // The resumed state is the checkpoint's: a run that trains no step (it is
  // already at its end) writes none, so nothing in --checkpoint-dir, another
  // run's file at that step included, is replaced by it.
  last_checkpoint_step_ = s.step;
  status.steps_done = s.step;
  status.skipped_total = s.skipped_steps;
  status.steps_taken = s.optimizer_steps;
  cursor_.move_to(s.epoch, s.epoch_sample_offset);  // drops the cached orders: the seed may change below
  // With --drop-last and a larger global batch than the checkpoint's, what
  // is left of its epoch may be less than a full step: that epoch is over.
  if (cursor_.epoch_done()) cursor_.next_epoch();
  if (s.seed != data_seed_) {
    say("resume: the checkpoint was made with --seed " + std::to_string(s.seed) + "; using it for the data order");
    data_seed_ = s.seed;
    cursor_.reseed(data_seed_);
  }
  say("resumed from " + path + " at step " + std::to_string(s.step) + " (epoch " + std::to_string(s.epoch + 1) + ")");
  return s.step;
}

int64_t Checkpointing::restore_weights(const TrainState& s, const std::string& path) {
  check_model_of(s, path);
  load_state(params_.registry().unpack(s.master_weights_fp32), params_.master_weights_fp32);
  say("evaluating " + path + " (step " + std::to_string(s.step) + ")");
  return s.step;
}

void Checkpointing::load_state(std::vector<float> flat, Buffer<float>& state) {
  // Sharded, each rank keeps its range of the file's state: rank 0's file,
  // should the ranks' scans of --checkpoint-dir ever disagree.
  if (params_.sharded()) agree_with_root(comm_, params_.weights_lowp.backend(), flat);
  if (&state == &params_.master_weights_fp32)
    params_.set_master_weights(flat);
  else
    params_.upload_owned(state, flat);
}

std::map<std::string, std::string> optimizer_settings(const TrainConfig& c) {
  auto text = [](double v) {
    char buffer[40];
    return std::string(buffer, std::to_chars(buffer, buffer + sizeof buffer, v).ptr);
  };
  std::map<std::string, std::string> m = {{"lr", text(c.lr)}, {"weight-decay", text(c.weight_decay)}};
  if (c.lr_scaling != LrScaling::None)  // the rate's rule: a resume under another one is noted
    m["lr-scaling"] = std::string(lr_scaling_name(c.lr_scaling)) + "@" + std::to_string(c.base_batch);
  if (c.optimizer == OptimizerKind::AdamW) {
    m["beta1"] = text(c.beta1);
    m["beta2"] = text(c.beta2);
    m["eps"] = text(c.eps);
  } else {
    m["momentum"] = text(c.momentum);
    m["nesterov"] = c.nesterov ? "1" : "0";
  }
  return m;
}

std::vector<std::string> Checkpointing::optimizer_setting_notes(const TrainState& s) const {
  std::vector<std::string> notes;
  for (const auto& [flag, value] : optimizer_settings(cfg_)) {
    const auto it = s.optimizer_settings.find(flag);
    if (it != s.optimizer_settings.end() && it->second != value)
      notes.push_back("resume: the checkpoint was trained with --" + flag + " " + it->second + "; this run uses " +
                      value);
  }
  return notes;
}

void Checkpointing::ensure_run_id() {
  if (run_id_ == 0) run_id_ = fresh_run_id();
}

uint64_t Checkpointing::fresh_run_id() {
  std::random_device device;
  std::seed_seq seq{device(), device(), static_cast<unsigned>(::getpid()),
                    static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count())};
  std::mt19937_64 rng(seq);
  uint64_t id = 0;
  while (id == 0) id = rng();
  return id;
}

std::unique_ptr<MetricsFile> Checkpointing::prepare_outputs(int64_t step) {
  std::vector<std::string> notes;
  if (!cfg_.checkpoint_dir.empty() && !cfg_.eval_only) {  // --eval-only writes no checkpoint
    const int64_t total_steps = plan_.total_steps;
    const int64_t last_step =
        cfg_.stop_after_steps > 0 ? std::min(total_steps, step + cfg_.stop_after_steps) : total_steps;
    notes = check_checkpoint_dir_for_run(cfg_.checkpoint_dir, resumed_, step, std::max(last_step, step), run_id_);
  }
  // --eval-only writes no checkpoint and no weights: a --config's
  // --checkpoint-dir (read by a bare --resume) or --save-weights is no output.
  TrainConfig outputs = cfg_;
  if (cfg_.eval_only) {
    outputs.checkpoint_dir.clear();
    outputs.save_weights_dir.clear();
  }
  for (const std::string& line : check_run_outputs(outputs, cfg_.resume, &run_lock_)) notes.push_back(line);
  if (!run_lock_.note().empty()) notes.push_back(run_lock_.note());
  for (const std::string& line : notes) say(line);
  if (cfg_.metrics_path.empty()) return nullptr;
  return std::make_unique<MetricsFile>(cfg_.metrics_path, cfg_.resume);
}

TrainState Checkpointing::snapshot(int64_t step) {
  const StepStatus& status = state_.read(step);
  TrainState s;
  s.model_kind = model_kind_name(cfg_);
  for (const ParameterTensor& t : params_.registry().tensors()) s.tensors.push_back({t.name, t.shape});
  s.model_dims = model_dims(cfg_);
  s.activation = model_activation_name(cfg_);
  s.tokenizer = cfg_.tokenizer;
  s.loss = cfg_.loss_name;
  // Sharded: gathered whole on every rank (sharded_state.h), one state at a time.
  s.master_weights_fp32 = params_.registry().pack(gather_fp32_state(comm_, params_, params_.master_weights_fp32));
  s.momentum_fp32 = params_.registry().pack(gather_fp32_state(comm_, params_, params_.momentum_fp32));
  if (cfg_.optimizer == OptimizerKind::AdamW)
    s.second_moment_fp32 = params_.registry().pack(gather_fp32_state(comm_, params_, params_.second_moment_fp32));
  s.momentum_initialized = status.momentum_initialized != 0;
  s.optimizer = optimizer_kind_name(cfg_.optimizer);
  s.precision = precision_name(cfg_.precision);
  s.optimizer_settings = optimizer_settings(cfg_);
  s.optimizer_steps = status.steps_taken;
  s.scaler = scaler_state_of(status);
  s.step = step;
  s.epoch = cursor_.epoch();
  s.epoch_sample_offset = cursor_.epoch_offset();
  s.skipped_steps = status.skipped_total;
  s.seed = data_seed_;
  s.run_id = run_id_;
  s.train_samples = train_.count;
  s.global_batch = global_batch();
  return s;
}

std::string Checkpointing::path_at(int64_t step) const {
  return (std::filesystem::path(cfg_.checkpoint_dir) / checkpoint_file_name(step)).string();
}

void Checkpointing::write(int64_t step) {
  if (cfg_.checkpoint_dir.empty() || last_checkpoint_step_ == step) return;
  const Clock::time_point start = Clock::now();
  CheckpointTimes times;
  // One write in flight at most: the files appear in step order, pruning
  // sees what the synchronous path would, and one state copy is held.
  if (cfg_.async_checkpoint && writer_.in_flight()) {
    count_write(writer_.wait());
    times.wait_s = seconds_since(start);
  }
  TrainState s = snapshot(step);  // every rank downloads; only rank 0 writes
  last_checkpoint_step_ = step;
  if (comm_.rank() == 0) {
    CheckpointTarget target{cfg_.checkpoint_dir, path_at(step), cfg_.keep_checkpoints, run_id_, model_dims(cfg_)};
    MidWriteHook mid_write = checkpoint_write_hook(write_fault_, step);
    if (cfg_.async_checkpoint) {
      writer_.start(step, [target = std::move(target), s = std::move(s), mid_write = std::move(mid_write)] {
        write_and_prune(target, s, mid_write);
      });
    } else {
      write_and_prune(target, s, mid_write);
    }
  }
  times.blocked_s = seconds_since(start);
  count(times);
}

void Checkpointing::poll_write() {
  if (writer_.in_flight()) count_write(writer_.poll());
}

void Checkpointing::wait_for_write() {
  if (!writer_.in_flight()) return;
  const Clock::time_point start = Clock::now();
  count_write(writer_.wait());
  CheckpointTimes times;
  times.wait_s = seconds_since(start);
  times.blocked_s = times.wait_s;
  count(times);
}

void Checkpointing::count(const CheckpointTimes& times) {
  interval_times_ += times;
  run_times_ += times;
  // Rank 0 writes: once a write shows that a stop through mpirun would be cut off, say so once.
  if (comm_.rank() != 0 || grace_noted_) return;
  const std::string note = stop_grace_note(std::max(times.blocked_s, times.write_s), mpirun_sigterm_grace_s());
  if (note.empty()) return;
  say(note);
  grace_noted_ = true;
}

void Checkpointing::count_write(const std::optional<AsyncCheckpointWriter::Finished>& finished) {
  if (!finished) return;
  CheckpointTimes times;
  times.write_s = finished->write_s;
  count(times);
}

CheckpointTimes Checkpointing::take_interval_times() {
  const CheckpointTimes times = interval_times_;
  interval_times_ = CheckpointTimes{};
  return times;
}

}  // namespace ddp
