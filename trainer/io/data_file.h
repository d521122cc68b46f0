// data_file.h: reading a whole data file into memory, gunzipping it when it
// starts with the gzip magic (1f 8b). Readers then parse a byte buffer, which
// keeps their parsers pure functions a fuzzer can call. Reads go through
// input_file.h (regular files only, at most the input limit); inflating is
// bounded too, by the limit or by the size the file's header declares.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "trainer/io/input_file.h"

namespace ddp {

// The file's bytes as stored, at most input_limit_bytes() of them.
// DataError("<path>: cannot open: ...") if it is missing or unreadable.
std::vector<uint8_t> read_file_bytes(const std::string& path);

// The file's content: its bytes, inflated when they are gzip; at most
// `max_bytes` either way.
std::vector<uint8_t> read_data_file(const std::string& path, size_t max_bytes = input_limit_bytes());

// A format's header read from the first bytes of an inflated stream: the
// total size the file declares, header included (may throw DataError for a
// header that declares more than the limit). Given at most `head_bytes`.
struct DeclaredSize {
  size_t head_bytes;                                               // enough for the longest header
  std::function<size_t(const std::vector<uint8_t>&)> total_bytes;  // from those first bytes
  std::string declared_by;                                         // "its IDX header", for the message
};

// read_data_file for a format whose header states its size: a gzip stream
// is inflated first up to `declared.head_bytes`, then to no more than the
// size the header states, so a gzip bomb stops there.
std::vector<uint8_t> read_data_file(const std::string& path, const DeclaredSize& declared);

bool is_gzip(const std::vector<uint8_t>& bytes);

// Inflates a gzip stream (one or more members, as `gzip -d` accepts) of at
// most `max_bytes`. DataError naming `name` on corrupt or truncated input
// and on more output than `max_bytes` ("a gzip bomb?"; `bound_reason` says
// where the bound came from, e.g. "the size its IDX header states").
std::vector<uint8_t> gunzip_bytes(const std::vector<uint8_t>& compressed, const std::string& name,
                                  size_t max_bytes = input_limit_bytes(), const std::string& bound_reason = "");

// The first `prefix_bytes` of the inflated stream (fewer when it is
// shorter, or cut short: the full read reports that).
std::vector<uint8_t> gunzip_prefix(const std::vector<uint8_t>& compressed, const std::string& name,
                                   size_t prefix_bytes);

}  // namespace ddp
