// token_files.h: a file of tokens, for a language model (--data text). Three
// encodings:
//   bytes    the file's bytes are the tokens (vocabulary 256): any text;
//   llm.c    karpathy/llm.c's .bin shards: a header of 256 little-endian
//            int32 (header[0] the magic 20240520, header[1] the version 1,
//            header[2] the token count), then that many little-endian uint16
//            GPT-2 tokens;
//   raw-u16  nanoGPT's train.bin / val.bin: little-endian uint16 tokens, no
//            header.
// --token-format auto (the default) reads an llm.c shard by its magic and any
// other file as bytes; raw-u16 has no magic, so it is asked for by name.
// Every refusal is a one-line DataError naming the file and the field.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "trainer/io/input_file.h"

namespace ddp {

enum class TokenFormat { Auto, Bytes, RawU16 };    // what --token-format asks for
enum class TokenEncoding { Bytes, Llmc, RawU16 };  // what a file was read as

// "auto" | "bytes" | "raw-u16"; anything else is an Error naming --token-format.
TokenFormat parse_token_format(const std::string& text);

// "bytes", "an llm.c .bin shard", "raw uint16", for messages.
const char* token_encoding_name(TokenEncoding encoding);

constexpr int32_t kLlmcMagic = 20240520;
constexpr int32_t kLlmcVersion = 1;  // uint16 (GPT-2) tokens
constexpr size_t kLlmcHeaderInts = 256;
constexpr size_t kLlmcHeaderBytes = kLlmcHeaderInts * sizeof(int32_t);

// Vocabularies: bytes have 256 ids; llm.c shards and raw uint16 files hold
// GPT-2 tokens unless --vocab-size says otherwise (text_data.h).
constexpr int kByteVocabSize = 256;
constexpr int kGpt2VocabSize = 50257;

struct TokenStream {
  std::vector<uint16_t> tokens;  // [n] in file order; uint16 holds every id of the three encodings
  TokenEncoding encoding = TokenEncoding::Bytes;
  std::string source;  // the file, for messages
};

// Parses the whole content of a token file (a pure function of the bytes,
// for the fuzzer). DataError("<name>: ...") for an llm.c header that is cut
// short, of another version, or whose token count disagrees with the file's
// size, for an odd byte length where the tokens are uint16, and for a raw-u16
// file that starts with the llm.c magic.
TokenStream parse_token_bytes(const std::vector<uint8_t>& bytes, TokenFormat format, const std::string& name);

// Reads `path` (a regular file; not gunzipped: its bytes are what is read)
// and parses it. Before a byte is read, what the file will take once loaded
// (token_memory_bytes) must fit `max_bytes`: a multi-GB file that cannot be
// held is refused by its size in one line, not read into a machine that
// then swaps or is killed.
TokenStream read_token_file(const std::string& path, TokenFormat format, size_t max_bytes = input_limit_bytes());

// The most memory a token file of `file_bytes` takes while it is loaded:
// its uint16 stream and the windows' int32 ids and labels, held together
// while the windows are built (text_data.cpp): 2 + 8 bytes per byte of a
// byte text, 1 + 4 per byte of a file of uint16 tokens.
size_t token_memory_bytes(size_t file_bytes, bool uint16_tokens);

// DataError naming the file and the position (counted from 0) of the first
// token id that is not below `vocab_size`; `vocab_text` says where the bound
// came from: "--vocab-size 100", "GPT-2's vocabulary 50257".
void require_tokens_below(const TokenStream& stream, int vocab_size, const std::string& vocab_text);

}  // namespace ddp
