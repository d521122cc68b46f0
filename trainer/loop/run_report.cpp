// run_report.cpp: the run's lines and metrics records (run_report.h).
#include "trainer/loop/run_report.h"

#include <cmath>
#include <cstdio>
#include <utility>

#include "trainer/config/model_catalog.h"
#include "trainer/loop/stop_signal.h"
#include "trainer/report/activation_report.h"

namespace ddp {
namespace {
std::string percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f%%", 100.0 * fraction);
  return buf;
}
}  // namespace

RunReport::RunReport(const TrainConfig& cfg, const Communicator& comm)
    : cfg_(cfg), comm_(comm), progress_(comm.rank() == 0) {}

void RunReport::banner(size_t parameters, const Dataset& train, const Dataset& test, const RunPlan& plan) {
  say("model: " + model_summary(cfg_) + ", loss " + cfg_.loss_name + ", " + std::to_string(parameters) + " parameters");
  say("data: train " + std::to_string(train.count) + " samples (" + train.source + "), test " +
      std::to_string(test.count));
  if (cfg_.eval_only) {  // no steps: the test set in batches of --batch-size per rank
    say("world " + std::to_string(world()) + " (" + comm_.name() + "), evaluation only, batch " +
        std::to_string(cfg_.batch_size) + " per rank");
    return;
  }
  std::string accum;
  if (cfg_.grad_accum > 1) accum = " x " + std::to_string(cfg_.grad_accum) + " micro-batches";
  if (cfg_.grad_predivide != 1.0) accum += ", gradients predivided by " + json_number(cfg_.grad_predivide);
  say("world " + std::to_string(world()) + " (" + comm_.name() + "), batch " + std::to_string(cfg_.batch_size) +
      " per rank" + accum + ", global batch " + std::to_string(global_batch()) + "; " +
      std::to_string(plan.total_steps) + " steps (" + std::to_string(plan.steps_per_epoch) + " per epoch)");
  if (cfg_.lr_scaling != LrScaling::None) {  // the rate the run uses, and where it came from
    const double lr = scaled_lr(cfg_.lr, cfg_.lr_scaling, cfg_.base_batch, global_batch());
    say("learning rate " + json_number(lr) + ": --lr " + json_number(cfg_.lr) + " for global batch " +
        std::to_string(cfg_.base_batch) + ", scaled " + lr_scaling_name(cfg_.lr_scaling) + " to " +
        std::to_string(global_batch()));
    if (metrics_) {
      JsonRecord r;
      r.add("event", "lr_scaling").add("rule", lr_scaling_name(cfg_.lr_scaling)).add("lr_given", cfg_.lr);
      r.add("base_batch", cfg_.base_batch).add("global_batch", global_batch()).add("lr", lr);
      metrics_->write(r);
    }
  }
}

void RunReport::memory(const StateBytes& state, size_t other_bytes, const ZeroFormula& formula,
                       const ActivationKinds& activations) {
  say(memory_line(cfg_.zero_stage, world(), comm_.shard_size(), state, other_bytes, formula));
  if (!activations.empty()) say(activation_line(activations));
  if (!metrics_) return;
  JsonRecord r = memory_record(cfg_.zero_stage, world(), comm_.shard_size(), state, other_bytes, formula);
  add_activation_fields(r, activations);
  metrics_->write(r);
}

void RunReport::log_step(const ProgressSnapshot& snap, double lr, double grad_norm, double allreduce_hidden_fraction,
                         const CheckpointTimes& checkpoints) {
  progress_.log_line(snap);
  if (!metrics_) return;
  JsonRecord r;
  r.add("event", "step").add("step", snap.step).add("epoch", snap.epoch).add("loss", snap.loss);
  r.add("loss_scale", snap.loss_scale).add("skipped", snap.skipped).add("lr", lr);
  r.add("grad_norm", grad_norm).add("samples_per_s", snap.samples_per_s);
  r.add("allreduce_ms_per_step", snap.allreduce_ms_per_step);
  r.add("allreduce_hidden_fraction", allreduce_hidden_fraction);
  add_checkpoint_fields(r, checkpoints);
  metrics_->write(r);
}

void RunReport::add_checkpoint_fields(JsonRecord& r, const CheckpointTimes& times) const {
  if (cfg_.checkpoint_dir.empty()) return;
  r.add("checkpoint_blocked_s", times.blocked_s);
  if (!cfg_.async_checkpoint) return;
  r.add("checkpoint_wait_s", times.wait_s).add("checkpoint_write_s", times.write_s);
}

std::string RunReport::eval_figures(const EvalResult& result) const {
  char loss_text[32];
  std::snprintf(loss_text, sizeof loss_text, "%.4f", result.loss);
  std::string text = std::string("test loss ") + loss_text;
  // A byte-level language model's loss in bits per byte (nats / ln 2), the
  // figure character-level results are quoted in.
  if (model_reads_tokens(cfg_) && model_token_shape(cfg_).real_vocab == 256) {
    std::snprintf(loss_text, sizeof loss_text, "%.4f", result.loss / std::log(2.0));
    text += std::string(" (") + loss_text + " bits/byte)";
  }
  if (cfg_.loss == LossKind::SoftmaxCrossEntropy)
    text += ", test accuracy " + percent(result.accuracy) + " (" + std::to_string(result.correct) + "/" +
            std::to_string(result.predictions) + ")";
  return text;
}

void RunReport::eval(const EvalResult& result, int64_t step, int64_t epoch_1based, int64_t epochs_total) {
  say("epoch " + std::to_string(epoch_1based) + "/" + std::to_string(epochs_total) + " (step " + std::to_string(step) +
      "): " + eval_figures(result));
  if (!metrics_) return;
  JsonRecord r;
  r.add("event", "eval").add("step", step).add("epoch", epoch_1based).add("test_loss", result.loss);
  r.add("test_accuracy", result.accuracy);
  metrics_->write(r);
}

void RunReport::eval_only(const EvalResult& result, int64_t step) {
  say("eval-only (step " + std::to_string(step) + "): " + eval_figures(result));
  if (!metrics_) return;
  JsonRecord r;
  r.add("event", "eval").add("eval_only", true).add("step", step).add("test_loss", result.loss);
  r.add("test_accuracy", result.accuracy).add("test_samples", result.samples);
  metrics_->write(r);
}

void RunReport::summary(const TrainSummary& sum, double final_loss_scale, bool graph_mode) {
  std::string line = "done: " + std::to_string(sum.steps) + " steps (" + std::to_string(sum.skipped_steps) +
                     " skipped in total) in " + format_duration(sum.wall_s) + ", " +
                     std::to_string(static_cast<int64_t>(sum.samples_per_s)) + " samples/s over " +
                     std::to_string(world()) + " rank(s), global batch " + std::to_string(global_batch());
  if (world() > 1 && !graph_mode) {
    char comm_text[128];
    std::snprintf(comm_text, sizeof comm_text, ", all-reduce %.2f ms/step (%.0f%% hidden behind backward)",
                  sum.allreduce_ms_per_step, 100.0 * sum.allreduce_hidden_fraction);
    line += comm_text;
  }
  if (graph_mode)
    line +=
        "; " + std::to_string(sum.graph_replays) + " steps replayed from a CUDA graph (all-reduce time not measured)";
  if (cfg_.loss == LossKind::SoftmaxCrossEntropy) line += "; final test accuracy " + percent(sum.test_accuracy);
  char tail[96];
  std::snprintf(tail, sizeof tail, ", test loss %.4f; final loss scale %g", sum.test_loss, final_loss_scale);
  line += tail;
  say(line);
  if (!metrics_) return;
  JsonRecord r;
  r.add("event", "summary").add("test_accuracy", sum.test_accuracy).add("test_loss", sum.test_loss);
  // steps: the global step reached (continues across resumes); the
  // throughput figures are this run's (steps_this_run of them).
  r.add("steps", sum.final_step).add("steps_this_run", sum.steps).add("skipped_steps", sum.skipped_steps);
  r.add("samples_per_s", sum.samples_per_s);
  r.add("wall_s", sum.wall_s).add("world_size", static_cast<int64_t>(world()));
  r.add("global_batch", global_batch()).add("batch_per_rank", cfg_.batch_size);
  r.add("grad_accum", cfg_.grad_accum).add("loss_scale", final_loss_scale);
  r.add("allreduce_ms_per_step", sum.allreduce_ms_per_step);
  r.add("allreduce_hidden_fraction", sum.allreduce_hidden_fraction);
  r.add("graph_replays", sum.graph_replays);
  add_checkpoint_fields(r, sum.checkpoints);  // the run's: its last checkpoint and the wait for it included
  metrics_->write(r);
}

void RunReport::stopped_line(int signal, int64_t step, const std::string& checkpoint) {
  say("stopped by " + signal_name(signal) + " at step " + std::to_string(step) + " (" +
      (checkpoint.empty() ? std::string("no --checkpoint-dir, nothing saved")
                          : "checkpoint " + checkpoint + "; --resume continues") +
      ")");
}

void RunReport::stopped_record(int signal, int64_t step, const TrainSummary& sum, const std::string& checkpoint) {
  if (!metrics_) return;
  JsonRecord r;
  r.add("event", "stopped").add("signal", signal_name(signal)).add("step", step).add("steps_this_run", sum.steps);
  r.add("skipped_steps", sum.skipped_steps).add("wall_s", sum.wall_s);
  if (!checkpoint.empty()) r.add("checkpoint", checkpoint);
  add_checkpoint_fields(r, sum.checkpoints);  // the run's, the stop's checkpoint and the wait for it included
  metrics_->write(r);
}

void RunReport::finished_despite_signal(int signal, int64_t step, const std::string& checkpoint) {
  say(signal_name(signal) + " came while the run was finishing: it finished at step " + std::to_string(step) + " (" +
      (checkpoint.empty() ? std::string("no --checkpoint-dir") : "checkpoint " + checkpoint) + ")");
}

}  // namespace ddp
