// memory_report.cpp
#include "trainer/report/memory_report.h"

#include <cstdio>

namespace ddp {

StateBytes measured_state_bytes(const ParameterStore& p) {
  StateBytes b;
  b.precision = p.weights_lowp.backend().precision();
  b.fp32_masters = p.master_weights_fp32.size_bytes();
  b.optimizer_state =
      p.momentum_fp32.size_bytes() + p.second_moment_fp32.size_bytes() + p.weight_decay_mask.size_bytes();
  b.fp32_gradients = p.grads_fp32.size_bytes();
  b.fp16_weights = p.weights_lowp.size_bytes();
  b.fp16_gradients = p.grads_lowp.size_bytes();
  return b;
}

StateBytes largest_over_ranks(Communicator& comm, const StateBytes& m) {
  auto largest = [&](size_t v) { return static_cast<size_t>(comm.allreduce_max_host(static_cast<int64_t>(v))); };
  StateBytes b = m;
  b.fp32_masters = largest(m.fp32_masters);
  b.optimizer_state = largest(m.optimizer_state);
  b.fp32_gradients = largest(m.fp32_gradients);
  b.fp16_weights = largest(m.fp16_weights);
  b.fp16_gradients = largest(m.fp16_gradients);
  b.zero_buffers = largest(m.zero_buffers);
  return b;
}

ZeroFormula zero_formula_bytes(int stage, int shards, size_t parameters, bool adamw) {
  const double psi = static_cast<double>(parameters), n = static_cast<double>(shards);
  const double k = 4.0 + (adamw ? 8.0 : 4.0);
  const double weights = stage >= 3 ? 2.0 / n : 2.0, grads = stage >= 2 ? 2.0 / n : 2.0;
  const double state = stage >= 1 ? k / n : k;
  const double extras = (4.0 + (adamw ? 1.0 : 0.0)) / (stage >= 1 ? n : 1.0);
  ZeroFormula f;
  f.paper_bytes = (weights + grads + state) * psi;
  f.ours_bytes = f.paper_bytes + extras * psi;
  return f;
}

double host_bytes_needed(int stage, int shards, size_t parameters, bool adamw, bool state_on_host) {
  const double whole_fp32_weights = 4.0 * static_cast<double>(parameters);
  return whole_fp32_weights + (state_on_host ? zero_formula_bytes(stage, shards, parameters, adamw).ours_bytes : 0.0);
}

std::string host_memory_problem(int stage, int shards, int world, size_t parameters, bool adamw, bool state_on_host,
                                size_t physical_bytes) {
  const double needed = host_bytes_needed(stage, shards, parameters, adamw, state_on_host);
  if (needed <= static_cast<double>(physical_bytes)) return "";
  std::string advice;
  if (state_on_host && stage < 3) advice += ", or shard its state over more ranks (--zero 3)";
  if (state_on_host && stage >= 1 && shards < world)  // hybrid groups: each holds the whole state again
    advice += ", or over all " + std::to_string(world) + " ranks (--zero-shard-size " + std::to_string(world) + ")";
  char text[512];
  std::snprintf(text, sizeof text,
                "the model has %zu parameters: each rank needs %.1f GiB of host memory for them (%s), above this "
                "machine's %.1f GiB: make the model smaller (--n-layer, --n-embd, --layers)%s",
                parameters, needed / (1 << 30),
                state_on_host ? "the whole FP32 weights and its --zero state" : "the whole FP32 weights",
                static_cast<double>(physical_bytes) / (1 << 30), advice.c_str());
  return text;
}

namespace {
std::string mib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f MiB", bytes / (1 << 20));
  return text;
}
}  // namespace

std::string memory_line(int stage, int world, int shard_size, const StateBytes& s, size_t other_bytes,
                        const ZeroFormula& f) {
  const std::string lowp = s.precision == Precision::Bf16 ? "BF16" : "FP16";
  const std::string groups = shard_size < world ? ", sharded over groups of " + std::to_string(shard_size) + ", " +
                                                      std::to_string(world / shard_size) + " replicas"
                                                : std::string();
  return "memory per rank (--zero " + std::to_string(stage) + ", " + std::to_string(world) + " rank(s)" + groups +
         "): FP32 masters " + mib(s.fp32_masters) + ", optimizer state " + mib(s.optimizer_state) +
         ", FP32 gradients " + mib(s.fp32_gradients) + ", " + lowp + " weights " + mib(s.fp16_weights) + ", " + lowp +
         " gradients " + mib(s.fp16_gradients) + "; state " + mib(s.total()) + " against the ZeRO formula's " +
         mib(f.paper_bytes) + " (" + mib(f.ours_bytes) + " with our FP32 gradients and decay mask)" +
         (s.grads_whole_for_accumulation ? ", the " + lowp + " gradients whole for --grad-accum" : "") +
         (s.zero_buffers > 0 ? "; gather and staging buffers " + mib(s.zero_buffers) : "") +
         "; activations, scratch and buffers " + mib(other_bytes);
}

JsonRecord memory_record(int stage, int world, int shard_size, const StateBytes& s, size_t other_bytes,
                         const ZeroFormula& f) {
  JsonRecord r;
  // The fp16_* keys hold the 16-bit buffers in either precision (the names
  // tools already read); "precision" says which.
  r.add("event", "memory")
      .add("precision", precision_name(s.precision))
      .add("zero_stage", stage)
      .add("world_size", world)
      .add("zero_shard_size", shard_size);
  r.add("fp32_masters_bytes", s.fp32_masters).add("optimizer_state_bytes", s.optimizer_state);
  r.add("fp32_gradients_bytes", s.fp32_gradients).add("fp16_weights_bytes", s.fp16_weights);
  r.add("fp16_gradients_bytes", s.fp16_gradients).add("state_bytes", s.total());
  r.add("zero_buffers_bytes", s.zero_buffers).add("grads_whole_for_accumulation", s.grads_whole_for_accumulation);
  r.add("zero_formula_bytes", f.paper_bytes).add("zero_formula_with_extras_bytes", f.ours_bytes);
  r.add("other_bytes", other_bytes);
  return r;
}

}  // namespace ddp
