// bench_report.cpp
#include "launch/bench/bench_report.h"

#include <algorithm>
#include <cmath>

#include "trainer/io/json_writer.h"
#include "trainer/report/activation_report.h"

namespace ddp {

double peak_fp16_tflops(const std::string& device_description) {
  struct Peak {
    const char* name;
    double tflops;
  };
  // Dense FP16 with FP32 accumulation; H200 has the H100's SMs and clocks.
  static const Peak table[] = {{"H200", 989.0}, {"H100", 989.0}, {"A100", 312.0},
                               {"L40S", 362.0}, {"A10", 125.0},  {"V100", 125.0}};
  for (const Peak& p : table)
    if (device_description.find(p.name) != std::string::npos) return p.tflops;
  return 0.0;
}

namespace {
// Nearest-rank percentile of sorted values.
double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return std::nan("");
  const size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * sorted.size()));
  return sorted[std::min(sorted.size() - 1, rank == 0 ? 0 : rank - 1)];
}
}  // namespace

std::string bench_json_line(const BenchContext& c, const BenchTimings& t) {
  std::vector<double> sorted = t.step_s;
  std::sort(sorted.begin(), sorted.end());
  double total_s = 0.0;
  for (double s : t.step_s) total_s += s;
  const double steps = static_cast<double>(t.step_s.size());
  const double samples_per_s = steps * t.global_samples_per_step / std::max(total_s, 1e-12);
  const double tflops = samples_per_s * c.flops_per_sample / 1e12;
  const double peak = c.peak_tflops > 0 ? c.peak_tflops : peak_fp16_tflops(c.device);

  JsonRecord r;
  r.add("event", "bench")
      .add("model", c.model)
      .add("device", c.device)
      .add("world_size", static_cast<int64_t>(c.world_size));
  r.add("batch_per_rank", c.batch_per_rank)
      .add("grad_accum", c.grad_accum)
      .add("global_batch", t.global_samples_per_step);
  r.add("warmup_steps", c.warmup_steps).add("timed_steps", static_cast<int64_t>(t.step_s.size()));
  r.add("samples_per_s", samples_per_s);
  if (c.tokens_per_sample > 0) r.add("tokens_per_s", samples_per_s * static_cast<double>(c.tokens_per_sample));
  r.add("step_ms_median", 1e3 * percentile(sorted, 50)).add("step_ms_p10", 1e3 * percentile(sorted, 10));
  r.add("step_ms_p90", 1e3 * percentile(sorted, 90));
  r.add("model_tflops", tflops);
  const double unknown = std::nan("");  // written as null
  r.add("peak_tflops", peak > 0 ? peak : unknown).add("mfu", peak > 0 ? tflops / peak : unknown);
  r.add("graph_replays", t.graph_replays);
  // Memory and communication volume (per rank): the state by the ZeRO
  // stage, the trainer's allocation peak, and the bytes a ring algorithm
  // (NCCL's) sends for the step's collectives, from the calls' sizes: an
  // all-reduce of n 16-bit elements sends 2 (N-1)/N n x 2 bytes, a reduce-
  // scatter or an all-gather half that; the sums' elements are 4 bytes
  // with --grad-reduce-dtype fp32 (the gathers' stay 2). The theory is the ZeRO paper's:
  // 2 Psi elements of traffic at stages 0-2, 3 Psi at stage 3. In shard
  // groups of G (R = N / G replicas) the sharded collectives' rings are
  // the group's, (G-1)/G, and each reduce-scatter's 1/G of the elements is
  // then all-reduced over the R replicas: the same total as one group's at
  // stages 1 and 2 (a reduce-scatter and an all-gather are an all-reduce),
  // but only that all-reduce crosses the groups (the nodes, by default).
  const double n = static_cast<double>(c.world_size), ring = n > 1 ? (n - 1) / n : 0.0;
  const double g = t.zero_shard_size > 0 ? static_cast<double>(t.zero_shard_size) : n, replicas = n / g;
  const double group_ring = g > 1 ? (g - 1) / g : 0.0, replica_ring = replicas > 1 ? (replicas - 1) / replicas : 0.0;
  const double reduce_scatter_share = group_ring + 2.0 * replica_ring / g;
  const double sum_bytes = static_cast<double>(t.reduce_wire_bytes), gather_bytes = 2.0;
  const double sent = sum_bytes * (2.0 * ring * t.allreduce_elements_per_step +
                                   reduce_scatter_share * t.reduce_scatter_elements_per_step) +
                      gather_bytes * group_ring * t.allgather_elements_per_step;
  r.add("precision", precision_name(t.precision));
  r.add("grad_reduce_dtype", t.reduce_wire_bytes == 4 ? "fp32" : precision_name(t.precision));
  r.add("zero_stage", t.zero_stage).add("zero_shard_size", static_cast<int64_t>(g));
  r.add("parameters", t.parameters).add("state_bytes_per_rank", t.state_bytes_max);
  r.add("peak_allocated_bytes_per_rank", t.peak_allocated_bytes_max);
  // Beside the peak, its formula: the state's (ZeRO's, with our extras) and
  // the activations' by kind. The tally's peak also holds what neither
  // states (the batch slots, the loss head, the CPU GEMMs' FP32 widening,
  // communication staging, padding): the rest is that.
  add_activation_fields(r, t.activations);
  const double peak_formula = t.state_formula_bytes + activation_formula_total(t.activations);
  r.add("peak_formula_bytes", peak_formula);
  r.add("peak_beyond_formula_bytes", static_cast<double>(t.peak_allocated_bytes_max) - peak_formula);
  // The device's own count (cudaMemGetInfo, every process and the CUDA
  // context's share included), beside the tally; null on the CPU.
  r.add("device_used_bytes_per_rank",
        t.device_used_bytes_max > 0 ? static_cast<double>(t.device_used_bytes_max) : unknown);
  r.add("comm_bytes_per_step_per_rank", sent);
  r.add("comm_bytes_across_groups_per_step_per_rank",
        sum_bytes * 2.0 * replica_ring / g * t.reduce_scatter_elements_per_step);
  const double psi = static_cast<double>(t.parameters);
  // The sums' share and the gathers' share of the ZeRO paper's volume.
  const double theory_sums = t.zero_stage == 0 ? 2.0 * ring * psi : reduce_scatter_share * psi;
  const double theory_gathers = t.zero_stage == 0 ? 0.0 : (t.zero_stage >= 3 ? 2.0 : 1.0) * group_ring * psi;
  r.add("comm_bytes_theory", sum_bytes * theory_sums + gather_bytes * theory_gathers);
  // Replayed steps' all-reduces are not timed (no timing events in a
  // capture): with any replay the figures would be partial, so none is given.
  const bool timed = t.graph_replays == 0;
  r.add("allreduce_ms_per_step", !timed ? unknown : steps > 0 ? 1e3 * t.allreduce.busy_s / steps : 0.0);
  r.add("allreduce_exposed_ms_per_step", !timed ? unknown : steps > 0 ? 1e3 * t.allreduce.exposed_s / steps : 0.0);
  r.add("allreduce_hidden_fraction", !timed ? unknown : t.allreduce.hidden_fraction());
  return r.str();
}

}  // namespace ddp
