// flags_run.cpp: the flags of the run as a whole (device, threads, config
// file), of --bench and of the test hooks.
#include "launch/cli/flag_groups.h"

#include "kernels/error.h"
#include "trainer/config/config_check.h"
#include "trainer/io/int_list.h"

namespace po = boost::program_options;

namespace ddp {

namespace {

std::vector<int64_t> parse_step_list(const std::string& text, const char* flag) {
  std::vector<int64_t> steps;
  if (!parse_int_list(text, 1, INT64_MAX, steps))
    throw Error(std::string(flag) + ": '" + text + "' is not a comma-separated list of steps >= 1");
  return steps;
}

}  // namespace

po::options_description general_flags(TrainConfig& c, FlagText& t) {
  po::options_description general("General");
  // One flag per row, as --help lists them.
  // clang-format off
  general.add_options()
      ("help,h", "show this help and exit")
      ("config", po::value(&t.config_file), "INI file with the same options (key = value); the command line wins")
      ("device", po::value(&c.device)->default_value(c.device), "auto | cuda | cpu (auto: CUDA when a GPU is visible)")
      ("threads", po::value(&c.threads)->default_value(c.threads), "CPU compute threads per rank (0: the cores mpirun bound the rank to, else cores / local ranks; at most 8 a core)")
      ("collective-timeout", po::value(&c.collective_timeout_s)->default_value(c.collective_timeout_s),
       "seconds a collective may wait for the other ranks before this rank ends the job (0: wait forever)")
      ("check-worlds", po::value(&t.check_worlds),
       "check the other flags against the trainer's rules at each world size N[,N...] (ZeRO groups, "
       "--global-batch, ranks named by flags), print 'world N: ok' or 'world N: refused: ...' for each and "
       "exit (0: all ok, 1: one refused); trains nothing (launch/scaling_model.py asks it)");
  // clang-format on
  return general;
}

po::options_description bench_flags(BenchOptions& b) {
  po::options_description bench("Benchmark");
  // One flag per row, as --help lists them.
  // clang-format off
  bench.add_options()
      ("bench", po::bool_switch(&b.enabled),
       "time the training step on random data of the model's shape (one resident batch) and print one JSON line")
      ("bench-warmup", po::value(&b.warmup_steps)->default_value(b.warmup_steps), "untimed steps first")
      ("bench-steps", po::value(&b.timed_steps)->default_value(b.timed_steps), "timed steps")
      ("peak-tflops", po::value(&b.peak_tflops)->default_value(0.0),
       "the device's FP16 peak for MFU (0: by GPU name; CPU: none unless given)");
  // clang-format on
  return bench;
}

po::options_description fault_flags(TrainConfig& c, FlagText& t) {
  po::options_description faults("Fault injection (testing)");
  // One flag per row, as --help lists them.
  // clang-format off
  faults.add_options()
      ("inject-overflow", po::value(&t.inject_steps), "make these 1-based steps' gradients Inf: STEP[,STEP...]")
      ("inject-overflow-every", po::value(&c.inject_overflow_every)->default_value(0), "and every K-th step (0: off)")
      ("inject-overflow-rank", po::value(&c.inject_overflow_rank)->default_value(0), "the rank whose gradients overflow")
      ("stall-at-step", po::value(&c.stall_at_step)->default_value(0),
       "make --stall-rank sleep forever before this 1-based step's collectives (0: off)")
      ("stall-rank", po::value(&c.stall_rank)->default_value(0), "the rank that stalls");
  // clang-format on
  return faults;
}

void apply_run_flags(const po::variables_map& vm, const FlagText& t, TrainConfig& c) {
  // Read as a signed number so that "-1" is refused, not wrapped to 2^64 - 1.
  if (t.seed < 0) throw Error("--seed must be >= 0 (it is " + std::to_string(t.seed) + ")");
  c.seed = static_cast<uint64_t>(t.seed);
  c.shuffle = !vm["no-shuffle"].as<bool>();
  c.prefetch_batches = !vm["no-prefetch"].as<bool>();
  c.resume = vm.count("resume") > 0;
}

void apply_bench_flags(const BenchOptions& bench) {
  if (bench.warmup_steps < 0) throw Error("--bench-warmup must be >= 0");
  require_positive(bench.timed_steps, "--bench-steps");
  require_non_negative(bench.peak_tflops, "--peak-tflops");
}

void apply_fault_flags(const FlagText& t, TrainConfig& c) {
  if (!t.inject_steps.empty()) c.inject_overflow_steps = parse_step_list(t.inject_steps, "--inject-overflow");
}

}  // namespace ddp
