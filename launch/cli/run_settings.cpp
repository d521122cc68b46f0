// run_settings.cpp
#include "launch/cli/run_settings.h"

#include <set>

#include "launch/cli/device_select.h"
#include "trainer/io/file_identity.h"

namespace ddp {
namespace {

const std::set<std::string> kRankLocalFlags = {"threads", "config", "help"};

// Every flag whose value is a path the run reads (the outputs are compared
// as paths: rank 0 writes them, and --checkpoint-dir is also read below).
const std::set<std::string> kInputPathFlags = {
    "data-dir",  "train-images", "train-labels", "test-images", "test-labels",  "train-x",    "train-y",
    "test-x",    "test-y",       "train-csv",    "test-csv",    "train-text",   "val-text",   "init-weights",
    "resume",    "predict",      "gpt2-ranks",
};

std::string flag_of(const Setting& s) { return s.name.substr(2); }  // "--lr" -> "lr"

}  // namespace

bool is_rank_local_flag(const std::string& flag) { return kRankLocalFlags.count(flag) > 0; }

bool is_input_path_flag(const std::string& flag) { return kInputPathFlags.count(flag) > 0; }

std::vector<Setting> run_settings(const ParsedOptions& opts) {
  const TrainConfig& c = opts.config;
  std::vector<Setting> out;
  for (const Setting& s : opts.flag_values) {
    const std::string flag = flag_of(s);
    if (is_rank_local_flag(flag)) continue;
    if (!is_input_path_flag(flag) || s.value == "(unset)" || s.value == "''") {
      out.push_back(s);
      continue;
    }
    // The text is "'<path>'" (options.cpp: value_text).
    const std::string path = s.value.substr(1, s.value.size() - 2);
    out.push_back({s.name + " (what it holds)", file_identity(path)});
  }
  // A bare --resume takes the newest valid checkpoint in --checkpoint-dir:
  // ranks that see other files there would resume from other steps.
  if (c.resume && c.resume_path.empty())
    out.push_back({"--checkpoint-dir (the checkpoints a bare --resume chooses from)", listing_identity(c.checkpoint_dir)});
  // What check_flags_as_a_whole settled where the command line and --config contradict each other.
  out.push_back({"--steps (after --epochs on the command line)", std::to_string(c.steps)});
  out.push_back({"--resume (after --init-weights on the command line)", c.resume ? "true" : "false"});
  out.push_back({"--init-weights (after --resume on the command line)", c.init_weights_dir.empty() ? "none" : "given"});
  out.push_back({"--val-text (after --val-fraction on the command line)", c.data.val_text.empty() ? "none" : "given"});
  out.push_back({"--predict-output (resolved)", c.predict_output});
  // A CPU rank and a GPU rank would take different transports (MPI, NCCL).
  out.push_back({"--device (resolved on each node)", resolved_device_kind(c.device)});
  return out;
}

}  // namespace ddp
