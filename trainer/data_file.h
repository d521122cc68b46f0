// data_file.h: reading a whole data file into memory, gunzipping it when it
// starts with the gzip magic (1f 8b). Readers then parse a byte buffer, which
// keeps their parsers pure functions a fuzzer can call.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ddp {

// The file's bytes as stored. DataError("<path>: cannot open: ...") if it is
// missing or unreadable.
std::vector<uint8_t> read_file_bytes(const std::string& path);

// The file's content: its bytes, decompressed when they are gzip.
std::vector<uint8_t> read_data_file(const std::string& path);

bool is_gzip(const std::vector<uint8_t>& bytes);

// Decompresses a gzip stream (one or more members, as `gzip -d` accepts).
// DataError naming `name` on corrupt or truncated input.
std::vector<uint8_t> gunzip_bytes(const std::vector<uint8_t>& compressed, const std::string& name);

}  // namespace ddp
