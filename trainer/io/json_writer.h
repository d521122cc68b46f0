// json_writer.h: metrics as JSON Lines: one flat object per event, keys in
// insertion order, one line each, e.g.
//   {"event":"step","step":3,"loss":2.3025851,"scale":65536,"skipped":false}
//
// Numbers are written so they read back exactly: doubles (and floats) in the
// shortest form that round-trips (std::to_chars), integers in full; JSON has
// no Inf/NaN, so those become null. Strings are escaped per RFC 8259 and
// invalid UTF-8 is replaced by U+FFFD, so every line is valid JSON whatever a
// file name or message contains.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace ddp {

class JsonRecord {
 public:
  JsonRecord& add(const std::string& key, double value);
  // A float written as the shortest text that reads back as that float
  // ("0.1", not "0.10000000149011612"): metrics are mostly FP32.
  JsonRecord& add(const std::string& key, float value);
  JsonRecord& add(const std::string& key, int64_t value);
  JsonRecord& add(const std::string& key, uint64_t value);
  JsonRecord& add(const std::string& key, bool value);
  JsonRecord& add(const std::string& key, const std::string& value);
  // Without this a string literal would convert to bool. nullptr writes null.
  JsonRecord& add(const std::string& key, const char* value);

  // Every other integer type (int, unsigned, long long, size_t, ...) as an
  // exact integer; without it add(key, 3) would be ambiguous.
  template <typename Int, std::enable_if_t<std::is_integral_v<Int> && !std::is_same_v<Int, bool>, int> = 0>
  JsonRecord& add(const std::string& key, Int value) {
    if constexpr (std::is_signed_v<Int>) {
      return add(key, static_cast<int64_t>(value));
    } else {
      return add(key, static_cast<uint64_t>(value));
    }
  }

  // The object on one line, without the newline. Adding a key twice throws
  // ddp::Error (a JSON reader would silently keep one of them).
  std::string str() const;

 private:
  JsonRecord& add_raw(const std::string& key, const std::string& json_value);

  std::string body_;               // "\"k\":v,\"k2\":v2"
  std::vector<std::string> keys_;  // for the duplicate check
};

// Text forms, exposed for tests and for other writers of JSON.
std::string json_number(double value);  // shortest round-trip text, or "null"
std::string json_number(float value);
std::string json_string(const std::string& text);  // quoted and escaped

// A metrics file: truncated when opened, one flushed line per record, so a
// crash leaves only complete lines behind. A file this run created and could
// not write its first line to (a full disk, a file size limit) is removed
// with the error: a failed run leaves no empty metrics file.
class MetricsFile {
 public:
  // Throws ddp::Error naming `path` when it cannot be created.
  // append: a resumed run adds its records after the earlier run's.
  explicit MetricsFile(const std::string& path, bool append = false);
  // Records the file as ddp_train's once more (output_registry.h).
  ~MetricsFile();
  MetricsFile(const MetricsFile&) = delete;
  MetricsFile& operator=(const MetricsFile&) = delete;

  // Throws ddp::Error naming the path when the line cannot be written.
  void write(const JsonRecord& record);

  const std::string& path() const { return path_; }

 private:
  struct Closer {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::string path_;
  bool created_ = false;  // the path held nothing before this run opened it
  int64_t lines_written_ = 0;
  std::unique_ptr<std::FILE, Closer> file_;
};

}  // namespace ddp
