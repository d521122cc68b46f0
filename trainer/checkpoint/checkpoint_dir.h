// checkpoint_dir.h: a directory of checkpoint files: their names, the
// newest valid one (what a bare --resume takes), and pruning by lineage.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ddp {

// "ckpt-step000000001234.safetensors": zero-padded so names sort like
// steps. A directory scan also takes the names of format 1 checkpoints
// ("ckpt-step000000001234.ddpckpt", earlier builds'), so they still resume.
// Throws ddp::Error for a negative step.
std::string checkpoint_file_name(int64_t step);

struct CheckpointScan {
  std::string newest_valid;                                  // full path; empty: none
  std::vector<std::pair<std::string, std::string>> skipped;  // (path, reason)
  size_t candidates = 0;                                     // files named like a checkpoint
};

// Examines the files named like checkpoints in `dir`, highest step first, and
// returns the first that validates completely (the file, and its contents:
// checkpoint_validation.h). Each one passed over, and each
// leftover "<name>.tmp.<pid>" of an interrupted write, is listed in `skipped`
// with the reason; nothing is deleted. A directory that does not exist holds
// no checkpoint (first run); other directory errors throw ddp::Error.
CheckpointScan find_newest_valid_checkpoint(const std::string& dir);

// Whether a checkpoint directory's own files (checkpoints and the temporary
// files of their writes) may have this name: such a name is this run's to
// write, and never another output's.
bool is_checkpoint_dir_file_name(const std::string& name);

// The files named like checkpoints in `dir`, (step, path), highest step
// first; an absent directory holds none.
std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& dir);

// Deletes the checkpoints of one run (lineage `run_id`, model
// `model_dims`) in `dir` beyond the `keep` highest-step ones (keep <= 0:
// deletes nothing), never `just_written` and none with a higher step than it
// (a resume from an earlier checkpoint leaves those of the branch it left
// alone). Files of other runs or models,
// files whose header cannot be read, lineage 0 and temporary files are left
// alone. Returns the paths removed; throws ddp::Error naming the file that
// could not be removed.
std::vector<std::string> prune_checkpoints(const std::string& dir, int keep, uint64_t run_id,
                                           const std::vector<int64_t>& model_dims, const std::string& just_written);

}  // namespace ddp
