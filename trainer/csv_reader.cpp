// csv_reader.cpp: a strict CSV reader for numeric data. No quoting, no
// locale: numbers go through std::from_chars, so "1,5" is two fields on every
// machine and "1.5" is always one and a half.
#include "trainer/csv_reader.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <string_view>

#include "trainer/data_error.h"
#include "trainer/data_file.h"

namespace ddp {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// from_chars takes no leading '+'; a CSV written by a program may have one.
bool parse_number(std::string_view field, double& value) {
  if (field.size() > 1 && field.front() == '+' && field[1] != '-') field.remove_prefix(1);
  if (field.empty()) return false;
  const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), value);
  return ec == std::errc() && end == field.data() + field.size();
}

std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> fields;
  for (;;) {
    const size_t comma = line.find(',');
    fields.push_back(trim(line.substr(0, comma)));
    if (comma == std::string_view::npos) return fields;
    line.remove_prefix(comma + 1);
  }
}

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    const size_t newline = text.find('\n');
    lines.push_back(text.substr(0, newline));
    if (newline == std::string_view::npos) break;
    text.remove_prefix(newline + 1);
  }
  // Blank trailing lines (and the final newline) carry no data.
  while (!lines.empty() && trim(lines.back()).empty()) lines.pop_back();
  return lines;
}

std::string where(size_t line, size_t column) {
  return "line " + std::to_string(line) + ", column " + std::to_string(column);
}

}  // namespace

Dataset parse_csv(const std::string& text, const std::string& name) {
  const std::vector<std::string_view> lines = split_lines(text);
  if (lines.empty()) throw DataError(name, "empty CSV file: no data rows");

  // A header is a first line with any field that is not a number.
  double ignored;
  const std::vector<std::string_view> first = split_fields(lines[0]);
  const bool has_header = std::any_of(first.begin(), first.end(), [&](std::string_view f) { return !parse_number(f, ignored); });
  const size_t fields = first.size();
  if (fields < 2) {
    throw DataError(name, "line 1: need at least 2 fields (features, then the label), found " + std::to_string(fields));
  }

  Dataset data;
  data.features = fields - 1;
  data.source = "CSV " + name;
  data.x.reserve((lines.size() - has_header) * data.features);
  for (size_t i = has_header ? 1 : 0; i < lines.size(); ++i) {
    const size_t line_no = i + 1;
    const std::vector<std::string_view> row = split_fields(lines[i]);
    if (row.size() != fields) {
      throw DataError(name, "line " + std::to_string(line_no) + ": expected " + std::to_string(fields) +
                                " fields, found " + std::to_string(row.size()) +
                                (trim(lines[i]).empty() ? " (blank line)" : ""));
    }
    for (size_t c = 0; c < fields; ++c) {
      double value;
      if (!parse_number(row[c], value)) {
        throw DataError(name, where(line_no, c + 1) + ": non-numeric field " + quote_excerpt(std::string(row[c])));
      }
      if (c + 1 < fields) {
        // "nan" and "inf" parse, and 1e39 overflows a float: name the cell.
        const float feature = static_cast<float>(value);
        if (!std::isfinite(feature)) {
          throw DataError(name, where(line_no, c + 1) + ": non-finite value " + quote_excerpt(std::string(row[c])));
        }
        data.x.push_back(feature);
        continue;
      }
      // Below INT32_MAX, not up to it: num_classes = label + 1 must fit an
      // int (label 2147483647 overflowed it; fuzz_csv, UBSan).
      if (!(value >= 0 && value < std::numeric_limits<int32_t>::max() && value == std::floor(value))) {
        throw DataError(name, where(line_no, c + 1) + ": label " + quote_excerpt(std::string(row[c])) +
                                  " is not a non-negative integer below 2^31 - 1");
      }
      data.labels.push_back(static_cast<int32_t>(value));
      data.num_classes = std::max(data.num_classes, data.labels.back() + 1);
    }
  }
  data.count = data.labels.size();
  if (data.count == 0) throw DataError(name, "CSV file has a header but no data rows");
  validate_dataset(data, name);
  return data;
}

Dataset load_csv_dataset(const std::string& path) {
  const std::vector<uint8_t> bytes = read_data_file(path);
  return parse_csv(std::string(bytes.begin(), bytes.end()), path);
}

}  // namespace ddp
