// flag_groups.h: the command line's flags by group, each group's file
// beside the part of the run it configures: the group's Boost description
// (bound to the config's fields, or to the text of a flag read after
// parsing), and what the group makes of that text once every source (the
// command line, then --config) is read. parse_options (options.cpp) reads
// them all at once and calls the apply_ functions in the order below.
#pragma once

#include <boost/program_options.hpp>

#include <cstdint>
#include <string>

#include "launch/cli/options.h"
#include "trainer/config/train_config.h"

namespace ddp {

// The flags whose text a group turns into config values after parsing.
struct FlagText {
  std::string config_file;
  std::string layers = "784,512,512,10";
  std::string activation = "relu";
  std::string loss = "xent";
  std::string schedule = "cosine";
  std::string lr_scaling = "none";
  std::string optimizer = "sgd";
  std::string precision = "fp16";
  std::string loss_scale;         // empty: the precision's default (dynamic for fp16, none for bf16)
  std::string grad_reduce_dtype;  // empty: the precision's
  std::string inject_steps;
  std::string trace_steps;
  std::string kv_cache;  // --kv-cache on|off
  std::string recompute = "none";
  std::string classifier_logits = "keep";
  std::string attention = "auto";
  std::string check_worlds;  // --check-worlds N[,N...]
  int64_t seed = 0;
};

// The groups, in --help's order (flags_run.cpp: general, bench, faults;
// flags_data.cpp; flags_model.cpp: model, gpt; flags_optimisation.cpp:
// optimisation, loss scaling; flags_output.cpp).
boost::program_options::options_description general_flags(TrainConfig& c, FlagText& t);
boost::program_options::options_description data_flags(TrainConfig& c);
boost::program_options::options_description model_flags(FlagText& t);
boost::program_options::options_description gpt_flags(TrainConfig& c, FlagText& t);
boost::program_options::options_description optimisation_flags(TrainConfig& c, FlagText& t);
boost::program_options::options_description loss_scaling_flags(TrainConfig& c, FlagText& t);
boost::program_options::options_description output_flags(TrainConfig& c, FlagText& t);
boost::program_options::options_description bench_flags(BenchOptions& b);
boost::program_options::options_description fault_flags(TrainConfig& c, FlagText& t);

// After parsing; each throws one line naming the flag.
// The seed, the data order, prefetching, a bare --resume.
void apply_run_flags(const boost::program_options::variables_map& vm, const FlagText& t, TrainConfig& c);
// The model's settings and the loss (their defaults follow --data and
// --model), the GPT's shape checks.
void apply_model_flags(const boost::program_options::variables_map& vm, FlagText& t, const BenchOptions& bench,
                       TrainConfig& c);
// The schedule, the LR scaling, the optimizer, the loss scale.
void apply_optimisation_flags(const FlagText& t, TrainConfig& c);
void apply_bench_flags(const BenchOptions& bench);
// --batch-size and --global-batch, given both.
void check_batch_flags(const boost::program_options::variables_map& vm);
// --zero-prefetch given with a --zero other than 3; --zero-shard-size with --zero 0.
void check_zero_flags(const boost::program_options::variables_map& vm);
void apply_fault_flags(const FlagText& t, TrainConfig& c);
// The trace window; --resume PATH.
void apply_output_flags(const FlagText& t, TrainConfig& c);

}  // namespace ddp
