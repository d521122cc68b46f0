// llmc_token_writer.cpp: little-endian bytes, whatever the host's order.
#include "trainer/data/llmc_token_writer.h"

#include "kernels/error.h"
#include "trainer/data/token_files.h"
#include "trainer/io/atomic_file.h"

namespace ddp {
namespace {

void put_le_int32(uint8_t* p, int32_t value) {
  const auto u = static_cast<uint32_t>(value);
  for (int k = 0; k < 4; ++k) p[k] = static_cast<uint8_t>(u >> (8 * k));
}

}  // namespace

std::vector<uint8_t> llmc_shard_bytes(const std::vector<uint32_t>& tokens) {
  if (tokens.size() > 0x7FFFFFFFu)
    throw Error("llm.c shard: " + std::to_string(tokens.size()) +
                " tokens, above the 2147483647 its int32 header can count; split the input");
  std::vector<uint8_t> bytes(kLlmcHeaderBytes + 2 * tokens.size(), 0);
  put_le_int32(bytes.data(), kLlmcMagic);
  put_le_int32(bytes.data() + 4, kLlmcVersion);
  put_le_int32(bytes.data() + 8, static_cast<int32_t>(tokens.size()));
  uint8_t* body = bytes.data() + kLlmcHeaderBytes;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] > 0xFFFFu)
      throw Error("llm.c shard: token id " + std::to_string(tokens[i]) + " at position " + std::to_string(i) +
                  " does not fit its uint16 tokens");
    body[2 * i] = static_cast<uint8_t>(tokens[i] & 0xFF);
    body[2 * i + 1] = static_cast<uint8_t>(tokens[i] >> 8);
  }
  return bytes;
}

void write_llmc_shard(const std::string& path, const std::vector<uint32_t>& tokens) {
  write_file_atomic(path, llmc_shard_bytes(tokens), "llm.c token file");
}

}  // namespace ddp
