// file_identity.h: what an input path holds, as one short text that two
// ranks can compare (the start-up agreement, trainer/config/rank_agreement.h):
// a node that reads another copy of a data set, a config file or a
// checkpoint than rank 0 is found before it trains on it.
#pragma once

#include <cstddef>
#include <string>

namespace ddp {

// Files up to this size are read whole for their CRC-32; a larger one is
// read in kIdentitySampleCount blocks of kIdentityBlockBytes spread over it,
// first and last block included, so a 100 GB token shard costs 64 MiB of
// reading, not 100 GB. Two copies of one file always agree; two different
// data files (different sizes, or bytes that differ anywhere in a block)
// are told apart.
constexpr size_t kIdentityWholeFileBytes = size_t{64} << 20;
constexpr size_t kIdentityBlockBytes = size_t{1} << 20;
constexpr size_t kIdentitySampleCount = 64;

// "file, 1234 bytes, crc32 1a2b3c4d" (", sampled" for a large file);
// a directory: "directory: " and each regular file's name and identity,
// by name, not recursing; "missing" where nothing is at the path;
// "unreadable: <why>" where it cannot be read. Never throws: the reader
// that opens the path later says what is wrong with it.
std::string file_identity(const std::string& path);

// A directory by its regular files' names and sizes only ("listing: a (12
// bytes); b (40 bytes);"), for one whose files are large and many (a
// checkpoint directory a bare --resume searches): cheap at any size.
// Otherwise as file_identity.
std::string listing_identity(const std::string& path);

}  // namespace ddp
