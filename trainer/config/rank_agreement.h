// rank_agreement.h: every rank's effective configuration compared with rank
// 0's once at start-up, before any collective depends on it. Ranks started
// with other flags (`mpirun -np 1 ddp_train A : -np 1 ddp_train B`), other
// config files or other copies of the data would otherwise crash (other
// model shapes), sum FP16 with BF16 words (other precisions), hang (other
// ZeRO stages) or train silently wrong (other learning rates).
//
// A rank's settings are (name, value text) pairs: every flag's value, input
// files by what they hold (trainer/io/file_identity.h) and what the rank
// resolved for itself (its device kind). Each becomes a 64-bit digest in a
// fixed-size record, so one all-gather of kAgreementWords words per rank
// compares them all; the ranks then agree on the same verdict from the same
// gathered words, and every rank stops at once with the same line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ddp {

struct Setting {
  std::string name;   // "--lr", or a resolved value's name ("device (resolved)")
  std::string value;  // its text as this rank sees it
};

// A record: [0] the number of settings, [1] a digest of their names in
// order (a different build lists other flags), then one digest per setting,
// zeros after the last.
constexpr size_t kAgreementWords = 512;
constexpr size_t kMaxSettings = kAgreementWords - 2;

// This rank's record; throws ddp::Error above kMaxSettings (a build that
// outgrew the record: a test keeps the flags below it).
std::vector<uint64_t> agreement_record(const std::vector<Setting>& settings);

// From every rank's record (world records of kAgreementWords, rank order),
// "" when all equal rank 0's, else one line naming what differs and which
// ranks, with rank 0's value from `settings` (the caller's own; every rank
// builds the same line from the same words):
//   "the ranks disagree on --lr: ranks 1, 3 have another value than rank 0's 0.1 (every rank must be started with
//    the same flags, config file and data)"
std::string find_disagreement(const std::vector<Setting>& settings, const std::vector<uint64_t>& gathered,
                              int world_size);

}  // namespace ddp
