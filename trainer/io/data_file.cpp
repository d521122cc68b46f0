// data_file.cpp: whole-file reads and in-memory gunzip with zlib's inflate.
// Reading everything first and inflating in one pass is the fast path for
// Fashion-MNIST (26 MB compressed, 47 MB raw): no per-record I/O calls.
// Output grows geometrically but never past the caller's bound (+1 byte, to
// see that there is more), so a small file cannot inflate to all memory.
#include "trainer/io/data_file.h"

#include <algorithm>
#include <memory>

#include <zlib.h>

#include "trainer/io/data_error.h"

namespace ddp {

std::vector<uint8_t> read_file_bytes(const std::string& path) {
  return read_input_file(path, input_limit_bytes(), "data file");
}

bool is_gzip(const std::vector<uint8_t>& bytes) { return bytes.size() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b; }

namespace {

// Inflates into at most `max_bytes` + 1 bytes of output, so more than
// `max_bytes` is seen without inflating the rest. `prefix_only`: stop
// quietly there (or where the input runs out) instead of failing.
std::vector<uint8_t> inflate_bounded(const std::vector<uint8_t>& compressed, const std::string& name, size_t max_bytes,
                                     bool prefix_only, const std::string& bound_reason) {
  z_stream stream{};
  // 15 + 16: a gzip wrapper (not zlib, not raw deflate), largest window.
  if (inflateInit2(&stream, 15 + 16) != Z_OK) throw DataError(name, "gzip: inflateInit2 failed");
  std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&stream, &inflateEnd);

  std::vector<uint8_t> out;
  // The gzip trailer's ISIZE is the size mod 2^32: a good first guess,
  // trusted only up to deflate's best ratio (1032:1) so a forged trailer
  // cannot make us allocate gigabytes up front.
  size_t guess = compressed.size() * 2 + 64;
  if (compressed.size() >= 18) {
    const uint8_t* t = compressed.data() + compressed.size() - 4;
    const size_t isize = size_t{t[0]} | size_t{t[1]} << 8 | size_t{t[2]} << 16 | size_t{t[3]} << 24;
    guess = std::max(guess, std::min(isize + 1, compressed.size() * 1032));
  }
  const size_t out_cap = prefix_only ? max_bytes : max_bytes + 1;
  auto throw_too_much = [&] {
    throw DataError(name, "gzip data inflates to more than " +
                              (bound_reason.empty() ? limit_text(max_bytes) + " (a gzip bomb?)"
                                                    : std::to_string(max_bytes) + " bytes, " + bound_reason +
                                                          " (trailing data, or a gzip bomb)"));
  };
  out.resize(std::min(guess, out_cap));
  size_t in_pos = 0, out_pos = 0;
  for (;;) {
    if (out_pos == out.size()) {
      if (prefix_only && out_pos == out_cap) return out;
      if (out_pos > max_bytes) throw_too_much();
      out.resize(std::min(std::max<size_t>(out.size() * 2, 64), out_cap));
    }
    // avail_* are 32-bit: feed at most 1 GiB per call.
    const size_t in_chunk = std::min<size_t>(compressed.size() - in_pos, size_t{1} << 30);
    const size_t out_chunk = std::min<size_t>(out.size() - out_pos, size_t{1} << 30);
    stream.next_in = const_cast<Bytef*>(compressed.data() + in_pos);
    stream.avail_in = static_cast<uInt>(in_chunk);
    stream.next_out = out.data() + out_pos;
    stream.avail_out = static_cast<uInt>(out_chunk);
    const int rc = inflate(&stream, Z_NO_FLUSH);
    in_pos += in_chunk - stream.avail_in;
    out_pos += out_chunk - stream.avail_out;
    if (rc == Z_STREAM_END) {
      if (in_pos == compressed.size()) break;
      // Another member follows (concatenated .gz files) or junk.
      if (compressed.size() - in_pos < 2 || compressed[in_pos] != 0x1f || compressed[in_pos + 1] != 0x8b) {
        throw DataError(name, "corrupt gzip: " + std::to_string(compressed.size() - in_pos) +
                                  " bytes of trailing garbage after the compressed data");
      }
      inflateReset(&stream);
      continue;
    }
    if (rc == Z_DATA_ERROR || rc == Z_NEED_DICT || rc == Z_STREAM_ERROR) {
      throw DataError(name, std::string("corrupt gzip data: ") + (stream.msg ? stream.msg : "inflate failed"));
    }
    if (rc == Z_MEM_ERROR) throw DataError(name, "gzip: out of memory while decompressing");
    // Z_BUF_ERROR (or Z_OK with nothing left to read): no progress possible.
    if (in_pos == compressed.size() && stream.avail_out != 0) {
      if (prefix_only) break;
      throw DataError(name, "truncated gzip stream: the compressed data ends before its end marker");
    }
  }
  if (!prefix_only && out_pos > max_bytes) throw_too_much();
  out.resize(out_pos);
  return out;
}

}  // namespace

std::vector<uint8_t> gunzip_bytes(const std::vector<uint8_t>& compressed, const std::string& name, size_t max_bytes,
                                  const std::string& bound_reason) {
  return inflate_bounded(compressed, name, max_bytes, false, bound_reason);
}

std::vector<uint8_t> gunzip_prefix(const std::vector<uint8_t>& compressed, const std::string& name,
                                   size_t prefix_bytes) {
  return inflate_bounded(compressed, name, prefix_bytes, true, "");
}

std::vector<uint8_t> read_data_file(const std::string& path, size_t max_bytes) {
  std::vector<uint8_t> bytes = read_input_file(path, max_bytes, "data file");
  if (!is_gzip(bytes)) return bytes;
  return naming_out_of_memory(path, [&] { return gunzip_bytes(bytes, path, max_bytes); });
}

std::vector<uint8_t> read_data_file(const std::string& path, const DeclaredSize& declared) {
  const size_t limit = input_limit_bytes();
  std::vector<uint8_t> bytes = read_input_file(path, limit, "data file");
  if (!is_gzip(bytes)) return bytes;  // the parser checks the header against the size on disk
  const size_t total_bytes = declared.total_bytes(gunzip_prefix(bytes, path, declared.head_bytes));
  return naming_out_of_memory(path, [&] {
    return gunzip_bytes(bytes, path, std::min(total_bytes, limit), "the size " + declared.declared_by + " states");
  });
}

}  // namespace ddp
