// checkpoint.h: the checkpoint file of a TrainState, its atomic write and
// its validating read. The directory of checkpoints (naming, newest valid
// file, pruning) is checkpoint_dir.h.
//
// Two formats, told apart by their first bytes:
//  - version 2 (checkpoint_v2.h), what this build writes: a safetensors
//    file, every state tensor FP32 under its name ("0.weight",
//    "optim.momentum.0.weight", ...), the training state in __metadata__
//    with a CRC-32 over the rest, so PyTorch and the safetensors tools read
//    it as they are;
//  - version 1 (checkpoint_v1.h), the binary file earlier builds wrote
//    (magic "DDPCKPT1"): read, so such a checkpoint still resumes.
// Either way a file cut short is "truncated (file ends after N bytes)", a
// damaged one "checksum mismatch (file corrupt)" or "corrupt ...".
//
// The state does not depend on the world size; only rank 0 writes.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kernels/error.h"
#include "trainer/checkpoint/train_state.h"
#include "trainer/io/atomic_file.h"

namespace ddp {

// A checkpoint that cannot be read, is damaged, or does not fit this run.
// what() is one line: "checkpoint <file>: <problem>".
class CheckpointError : public Error {
 public:
  CheckpointError(const std::string& file, const std::string& problem);
  const std::string& file() const { return file_; }
  const std::string& problem() const { return problem_; }  // what() without the file name

 private:
  std::string file_;
  std::string problem_;
};

// The complete file image of `s` in the format this build writes (v2).
std::vector<uint8_t> serialize_checkpoint(const TrainState& s);

// Writes `path + ".tmp.<pid>"` in the same directory, flushes and fsyncs it,
// renames it over `path` and fsyncs the directory, so `path` is at every
// moment either the old complete file or the new complete one. On failure
// the temporary file is removed and ddp::Error names the path and errno text.
// `mid_write`: a test hook (atomic_file.h's MidWriteHook; empty: none).
void write_checkpoint_atomic(const std::string& path, const TrainState& s, const MidWriteHook& mid_write = {});

// Reads and fully validates (format, version, lengths, checksum, structure).
// Throws CheckpointError, also when the file cannot be opened.
TrainState read_checkpoint(const std::string& path);

// The same validation on bytes in memory, either version; `name` is used in
// messages. Safe on arbitrary input: every count is bounded by the bytes
// that remain before anything is allocated.
TrainState parse_checkpoint(std::vector<uint8_t> bytes, const std::string& name);

// What the header of a checkpoint file says about whose it is, read without
// the tensors (and without the checksum, which covers the whole file).
struct CheckpointHeader {
  std::string model_kind;
  std::vector<int64_t> model_dims;
  int64_t step = 0;
  uint64_t run_id = 0;
};
// Throws CheckpointError when the header cannot be read or decoded.
CheckpointHeader read_checkpoint_header(const std::string& path);

// "truncated (file ends after N bytes)": the one wording both formats use.
std::string checkpoint_truncated_problem(size_t file_bytes);

}  // namespace ddp
