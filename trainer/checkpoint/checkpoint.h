// checkpoint.h: the binary checkpoint file of a TrainState, its atomic write
// and its validating read. The directory of checkpoints (naming, newest
// valid file, pruning) is checkpoint_dir.h.
//
// File layout, version 1 (every integer little-endian, every size explicit):
//
//   offset  size  field
//   0       8     magic "DDPCKPT1"
//   8       4     u32 format version (1)
//   12      4     u32 header length H: bytes of the header fields below
//   16      H     header fields, in this order:
//                   u64 n, n x i64   model dims (the MLP: its widths, input first)
//                   u32 n, n bytes   activation
//                   u32 n, n bytes   loss
//                   u8               momentum_initialized (0 or 1)
//                   f64              scaler.scale
//                   i64              scaler.growth_tracker
//                   i64              scaler.hysteresis_left
//                   i64 x 4          step, epoch, epoch_sample_offset, skipped_steps
//                   u64              seed
//                 then, optionally (absent from files of earlier builds,
//                 which read as 0 = not recorded):
//                   u64              run_id (lineage)
//                   u64              train_samples
//                   i64              global_batch
//   16+H    ...   u64 n, n x f32     master_weights_fp32 (IEEE bits)
//           ...   u64 n, n x f32     momentum_fp32
//   T-12    8     u64 total length T of the file, this trailer included
//   T-4     4     u32 CRC-32 (zlib) of bytes [0, T-4)
//
// The header is length-prefixed so a reader can check the small fields (the
// model shape) before the weights, and so the header's own counts are bounded
// by H; it also lets the header grow by fields appended at its end without a
// new version (a reader knows from H whether they are there). The total length sits at the end: a file cut anywhere is found short
// before the checksum is even looked at, and the message says "truncated"
// rather than "checksum mismatch".
//
// The state does not depend on the world size; only rank 0 writes.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kernels/error.h"
#include "trainer/checkpoint/train_state.h"

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

constexpr char kCheckpointMagic[8] = {'D', 'D', 'P', 'C', 'K', 'P', 'T', '1'};
constexpr uint32_t kCheckpointFormatVersion = 1;

// The complete file image of `s` (what write_checkpoint_atomic writes).
std::vector<uint8_t> serialize_checkpoint(const TrainState& s);

// Writes `path + ".tmp.<pid>"` in the same directory, flushes and fsyncs it,
// renames it over `path` and fsyncs the directory, so `path` is at every
// moment either the old complete file or the new complete one. On failure
// the temporary file is removed and ddp::Error names the path and errno text.
void write_checkpoint_atomic(const std::string& path, const TrainState& s);

// Reads and fully validates (magic, version, lengths, checksum, structure).
// Throws CheckpointError, also when the file cannot be opened.
TrainState read_checkpoint(const std::string& path);

// The same validation on bytes in memory; `name` is used in messages. Safe on
// arbitrary input: every count is bounded by the bytes that remain before
// anything is allocated.
TrainState parse_checkpoint(const std::vector<uint8_t>& bytes, const std::string& name);

// What the header of a checkpoint file says about whose it is, read without
// the weights (and without the checksum, which covers the whole file).
struct CheckpointHeader {
  std::vector<int64_t> model_dims;
  int64_t step = 0;
  uint64_t run_id = 0;
};
// Throws CheckpointError when the header cannot be read or decoded.
CheckpointHeader read_checkpoint_header(const std::string& path);

}  // namespace ddp
