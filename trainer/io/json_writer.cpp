// json_writer.cpp: JSON Lines records and the metrics file.
#include "trainer/io/json_writer.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>

#include "kernels/error.h"
#include "trainer/io/output_registry.h"

namespace ddp {

namespace {

// Length of the well-formed UTF-8 sequence starting at s[i], 0 if there is
// none (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF).
size_t utf8_sequence_length(const std::string& s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char lead = byte(i);
  if (lead < 0x80) return 1;
  size_t length = 0;
  unsigned char second_lo = 0x80, second_hi = 0xBF;  // the second byte's range depends on the lead
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) second_lo = 0xA0;  // overlong
    if (lead == 0xED) second_hi = 0x9F;  // UTF-16 surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) second_lo = 0x90;  // overlong
    if (lead == 0xF4) second_hi = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  if (i + length > s.size()) return 0;
  if (byte(i + 1) < second_lo || byte(i + 1) > second_hi) return 0;
  for (size_t k = 2; k < length; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return length;
}

template <typename Real>
std::string shortest_number(Real value) {
  if (!std::isfinite(value)) return "null";
  char text[64];
  // No precision argument: the shortest text that parses back to `value`.
  const auto [end, ec] = std::to_chars(text, text + sizeof(text), value);
  if (ec != std::errc()) throw Error("json_number: to_chars failed");
  return std::string(text, end);
}

}  // namespace

std::string json_number(double value) { return shortest_number(value); }
std::string json_number(float value) { return shortest_number(value); }

std::string json_string(const std::string& text) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size() + 2);
  out += '"';
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
      ++i;
    } else if (c < 0x20) {
      out += "\\u00";
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
      ++i;
    } else if (const size_t length = utf8_sequence_length(text, i); length > 0) {
      out.append(text, i, length);
      i += length;
    } else {
      out += "\\ufffd";  // one replacement per invalid byte, as decoders do
      ++i;
    }
  }
  out += '"';
  return out;
}

JsonRecord& JsonRecord::add_raw(const std::string& key, const std::string& json_value) {
  if (std::find(keys_.begin(), keys_.end(), key) != keys_.end()) {
    throw Error("JsonRecord: key \"" + key + "\" added twice");
  }
  keys_.push_back(key);
  if (!body_.empty()) body_ += ',';
  body_ += json_string(key);
  body_ += ':';
  body_ += json_value;
  return *this;
}

JsonRecord& JsonRecord::add(const std::string& key, double value) { return add_raw(key, json_number(value)); }
JsonRecord& JsonRecord::add(const std::string& key, float value) { return add_raw(key, json_number(value)); }
JsonRecord& JsonRecord::add(const std::string& key, int64_t value) { return add_raw(key, std::to_string(value)); }
JsonRecord& JsonRecord::add(const std::string& key, uint64_t value) { return add_raw(key, std::to_string(value)); }
JsonRecord& JsonRecord::add(const std::string& key, bool value) { return add_raw(key, value ? "true" : "false"); }
JsonRecord& JsonRecord::add(const std::string& key, const std::string& value) {
  return add_raw(key, json_string(value));
}
JsonRecord& JsonRecord::add(const std::string& key, const char* value) {
  return add_raw(key, value ? json_string(value) : "null");
}

std::string JsonRecord::str() const { return "{" + body_ + "}"; }

MetricsFile::MetricsFile(const std::string& path, bool append) : path_(path) {
  struct stat st {};
  created_ = ::lstat(path.c_str(), &st) != 0 && errno == ENOENT;
  file_.reset(std::fopen(path.c_str(), append ? "a" : "w"));
  if (!file_) throw Error("--metrics " + path + ": cannot create: " + std::strerror(errno));
}

void MetricsFile::write(const JsonRecord& record) {
  const std::string line = record.str() + "\n";
  // One flush per record: a crash then leaves only whole lines, and a reader
  // tailing the file sees each step as it happens.
  if (std::fwrite(line.data(), 1, line.size(), file_.get()) != line.size() || std::fflush(file_.get()) != 0) {
    const std::string why = std::strerror(errno);
    if (created_ && lines_written_ == 0) {
      file_.reset();  // closed before it goes: nothing of it is left
      std::remove(path_.c_str());
    }
    throw Error("--metrics " + path_ + ": cannot write: " + why);
  }
  ++lines_written_;
  // Recorded once it holds a line, and again when closed: an append-only
  // output stays ours while it only grows (output_registry.h), so a run
  // killed in between leaves a file a resumed run still appends to.
  if (lines_written_ == 1) record_output(path_, program_name() + " --metrics", /*append=*/true);
}

MetricsFile::~MetricsFile() {
  if (!file_ || lines_written_ == 0) return;
  std::fflush(file_.get());
  // Only the file this run wrote: not one moved or put in its place meanwhile.
  struct stat open_st {}, path_st {};
  if (::fstat(fileno(file_.get()), &open_st) != 0 || ::stat(path_.c_str(), &path_st) != 0 ||
      open_st.st_ino != path_st.st_ino || open_st.st_dev != path_st.st_dev)
    return;
  record_output(path_, program_name() + " --metrics", /*append=*/true);
}

}  // namespace ddp
