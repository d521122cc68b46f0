// token_files.cpp: the three token-file encodings (token_files.h). Values
// are decoded byte by byte as little-endian, the layout llm.c and numpy
// write, so the reader does not depend on the host's byte order.
#include "trainer/data/token_files.h"

#include <sys/stat.h>

#include "kernels/error.h"
#include "trainer/io/data_error.h"
#include "trainer/io/input_file.h"

namespace ddp {
namespace {

int32_t le_int32(const uint8_t* p) {
  return static_cast<int32_t>(uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24);
}

bool has_llmc_magic(const std::vector<uint8_t>& bytes) {
  return bytes.size() >= sizeof(int32_t) && le_int32(bytes.data()) == kLlmcMagic;
}

// The uint16 tokens of bytes[begin:] (callers check that the length is even).
std::vector<uint16_t> le_uint16s(const std::vector<uint8_t>& bytes, size_t begin) {
  std::vector<uint16_t> tokens(begin < bytes.size() ? (bytes.size() - begin) / 2 : 0);
  const uint8_t* p = bytes.data() + begin;
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<uint16_t>(p[2 * i] | p[2 * i + 1] << 8);
  return tokens;
}

std::string bytes_text(size_t n) { return std::to_string(n) + (n == 1 ? " byte" : " bytes"); }

TokenStream parse_llmc(const std::vector<uint8_t>& bytes, const std::string& name) {
  if (bytes.size() < kLlmcHeaderBytes)
    throw DataError(name, "truncated llm.c header: the file is " + bytes_text(bytes.size()) + ", the header alone " +
                              std::to_string(kLlmcHeaderBytes) + " (256 x int32)");
  const int32_t version = le_int32(bytes.data() + 4), count = le_int32(bytes.data() + 8);
  if (version != kLlmcVersion)
    throw DataError(name, "llm.c header: version " + std::to_string(version) +
                              " (header[1]); this reader knows version " + std::to_string(kLlmcVersion) +
                              " (uint16 GPT-2 tokens)");
  const size_t body_bytes = bytes.size() - kLlmcHeaderBytes;
  if (body_bytes % 2 != 0)
    throw DataError(name, "odd byte length " + std::to_string(bytes.size()) + ": after the " +
                              std::to_string(kLlmcHeaderBytes) +
                              "-byte llm.c header come uint16 tokens (2 bytes each)");
  if (count < 0 || static_cast<size_t>(count) != body_bytes / 2)
    throw DataError(name, "llm.c header: token count " + std::to_string(count) + " (header[2]), but the file holds " +
                              std::to_string(body_bytes / 2) +
                              " tokens after the header (cut short, or more appended?)");
  TokenStream s;
  s.encoding = TokenEncoding::Llmc;
  s.source = name;
  s.tokens = le_uint16s(bytes, kLlmcHeaderBytes);
  return s;
}

TokenStream parse_raw_u16(const std::vector<uint8_t>& bytes, const std::string& name) {
  // Read as raw uint16, the header would be 512 tokens of the text.
  if (has_llmc_magic(bytes))
    throw DataError(name,
                    "starts with the llm.c magic 20240520: it is an llm.c .bin shard, not raw uint16 "
                    "(--token-format auto reads it)");
  if (bytes.size() % 2 != 0)
    throw DataError(name, "odd byte length " + std::to_string(bytes.size()) +
                              ": raw-u16 tokens are uint16 (2 bytes each); is it a text file (--token-format bytes)?");
  TokenStream s;
  s.encoding = TokenEncoding::RawU16;
  s.source = name;
  s.tokens = le_uint16s(bytes, 0);
  return s;
}

}  // namespace

TokenFormat parse_token_format(const std::string& text) {
  if (text == "auto") return TokenFormat::Auto;
  if (text == "bytes") return TokenFormat::Bytes;
  if (text == "raw-u16") return TokenFormat::RawU16;
  throw Error("--token-format: '" + text + "' is not one of auto, bytes, raw-u16");
}

const char* token_encoding_name(TokenEncoding encoding) {
  switch (encoding) {
    case TokenEncoding::Bytes:
      return "bytes";
    case TokenEncoding::Llmc:
      return "an llm.c .bin shard";
    case TokenEncoding::RawU16:
      return "raw uint16";
  }
  return "?";
}

TokenStream parse_token_bytes(const std::vector<uint8_t>& bytes, TokenFormat format, const std::string& name) {
  if (format == TokenFormat::RawU16) return parse_raw_u16(bytes, name);
  if (format == TokenFormat::Auto && has_llmc_magic(bytes)) return parse_llmc(bytes, name);
  TokenStream s;
  s.encoding = TokenEncoding::Bytes;
  s.source = name;
  s.tokens.assign(bytes.begin(), bytes.end());
  return s;
}

size_t token_memory_bytes(size_t file_bytes, bool uint16_tokens) {
  // The stream and the windows, held together while the windows are built
  // (the file's bytes are freed once the stream is decoded, and the two
  // together are less).
  return uint16_tokens ? file_bytes * (1 + 4) : file_bytes * (2 + 8);
}

TokenStream read_token_file(const std::string& path, TokenFormat format, size_t max_bytes) {
  // Only a regular file is sized here (a FIFO's open could block); anything
  // else, or a missing file, is refused by read_input_file below.
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
    bool uint16_tokens = format == TokenFormat::RawU16;
    if (format == TokenFormat::Auto) uint16_tokens = has_llmc_magic(read_file_head(path, sizeof(int32_t)));
    require_within_limit(path, token_memory_bytes(static_cast<size_t>(st.st_size), uint16_tokens), max_bytes,
                         std::string("as ") + (uint16_tokens ? "uint16" : "byte") +
                             " tokens (the token stream and the windows' int32 ids and labels)");
  }
  const std::vector<uint8_t> bytes = read_input_file(path, max_bytes, "token file");
  return naming_out_of_memory(path, [&] { return parse_token_bytes(bytes, format, path); });
}

void require_tokens_below(const TokenStream& stream, int vocab_size, const std::string& vocab_text) {
  for (size_t i = 0; i < stream.tokens.size(); ++i) {
    if (stream.tokens[i] < vocab_size) continue;
    throw DataError(stream.source, "token id " + std::to_string(stream.tokens[i]) + " at position " +
                                       std::to_string(i) + " (counted from 0) is not below " + vocab_text);
  }
}

}  // namespace ddp
