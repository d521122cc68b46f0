// checkpoint_v2.h: checkpoint format version 2, a safetensors file
// (safetensors.h) that PyTorch and the safetensors tools read as it is:
//
//   tensors, all F32, back to back in this order:
//     <name>                      the FP32 master weights, one tensor per
//                                 parameter tensor, state_dict name and
//                                 PyTorch shape ("0.weight" [out, in])
//     optim.momentum.<name>       SGD: the momentum buffer
//     optim.exp_avg.<name>        AdamW: torch.optim.AdamW's exp_avg and
//     optim.exp_avg_sq.<name>            exp_avg_sq
//   __metadata__ (strings, as the format requires):
//     format "pt" (what Hugging Face's loaders expect), ddp_train.checkpoint
//     "2" (the format version; a safetensors file without it is not a
//     checkpoint), model, model_dims, activation, loss, optimizer,
//     optimizer.<flag> (the settings, e.g. optimizer.lr), optimizer_steps,
//     momentum_initialized, loss_scale, growth_tracker, hysteresis_left,
//     step, epoch, epoch_sample_offset, skipped_steps, seed, run_id,
//     train_samples, global_batch, tensor_bytes (the byte buffer's length),
//     crc32 (8 hex digits, zlib's CRC-32 over the tensor table, the other
//     metadata and the byte buffer: checkpoint_v2.cpp, checksum_of).
//
// Numbers are decimal text that reads back exactly (the shortest round-trip
// form for doubles). A file cut short is told by tensor_bytes before the
// checksum is looked at, so the message says "truncated".
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "trainer/checkpoint/checkpoint.h"

namespace ddp {

constexpr uint32_t kCheckpointV2FormatVersion = 2;

// The file's bytes. Needs s.tensors (names and shapes of the packed layout).
std::vector<uint8_t> serialize_checkpoint_v2(const TrainState& s);

// The whole file; CheckpointError naming `name` on any problem.
TrainState parse_checkpoint_v2(std::vector<uint8_t> bytes, const std::string& name);

// The header size a v2 file's first 8 bytes give; CheckpointError when it
// cannot be one of ours.
size_t checkpoint_v2_header_bytes(const uint8_t* first8, const std::string& name);
// The metadata alone, from the file's first 8 + header size bytes: every
// field but the tensors (the checksum is not checked: it covers the tensors).
TrainState decode_checkpoint_header_v2(const std::vector<uint8_t>& head, const std::string& name);

}  // namespace ddp
