// checkpoint_v1.h: checkpoint format version 1, the binary file earlier
// builds wrote. This build reads it (a v1 checkpoint still resumes) and
// writes version 2 (checkpoint_v2.h); the v1 writer stays so the tests can
// make v1 files.
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
// by H. The total length sits at the end: a file cut anywhere is found short
// before the checksum is even looked at, and the message says "truncated"
// rather than "checksum mismatch".
//
// A v1 file holds an MLP trained with SGD: its TrainState has model_kind
// "mlp", optimizer "sgd", no tensor names (the layout is the MLP's) and
// optimizer_steps = step - skipped_steps.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "trainer/checkpoint/checkpoint.h"

namespace ddp {

constexpr char kCheckpointV1Magic[8] = {'D', 'D', 'P', 'C', 'K', 'P', 'T', '1'};
constexpr uint32_t kCheckpointV1FormatVersion = 1;
constexpr size_t kCheckpointV1FixedHeaderBytes = 16;  // magic, version, header length
// A header holds a few short strings and the layer widths: anything larger
// is not a header of ours, and the header reader never allocates more.
constexpr uint32_t kCheckpointV1MaxHeaderBytes = 1u << 20;

std::vector<uint8_t> serialize_checkpoint_v1(const TrainState& s);
// The whole file; CheckpointError naming `name` on any problem.
TrainState parse_checkpoint_v1(const std::vector<uint8_t>& bytes, const std::string& name);

// The fixed 16 bytes: the version and the header length they give.
uint32_t checkpoint_v1_version(const uint8_t* fixed);
uint32_t checkpoint_v1_header_bytes(const uint8_t* fixed);
// The header fields alone (the H bytes after the fixed ones).
TrainState decode_checkpoint_header_v1(const uint8_t* header, size_t header_bytes, const std::string& name);

}  // namespace ddp
