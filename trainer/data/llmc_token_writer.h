// llmc_token_writer.h: an llm.c .bin shard written, the format
// token_files.h reads (and karpathy/llm.c's dev/data/data_common.py
// write_datafile writes): 256 little-endian int32 of header (the magic
// 20240520, the version 1, the token count, zeros), then the tokens as
// little-endian uint16. The writer sits beside the reader so the format's
// constants are defined once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ddp {

// The whole file for `tokens`. ddp::Error naming the position of the first
// id that does not fit uint16 (the format's tokens), or a count above the
// int32 header's 2^31 - 1.
std::vector<uint8_t> llmc_shard_bytes(const std::vector<uint32_t>& tokens);

// Writes llmc_shard_bytes(tokens) to `path` atomically (atomic_file.h): the
// file is the old one or the whole new one at every moment. Callers check
// first that `path` may be replaced.
void write_llmc_shard(const std::string& path, const std::vector<uint32_t>& tokens);

}  // namespace ddp
