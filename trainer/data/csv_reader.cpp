// csv_reader.cpp: a strict CSV reader for numeric data. No quoting, no
// locale: numbers go through std::from_chars, so "1,5" is two fields on every
// machine and "1.5" is always one and a half.
#include "trainer/data/csv_reader.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <string_view>

#include "trainer/io/data_error.h"
#include "trainer/io/data_file.h"
#include "trainer/io/input_file.h"

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

// The text up to the end of its last non-blank line: blank trailing lines
// (and the final newline) carry no data.
std::string_view without_trailing_blank_lines(std::string_view text) {
  for (;;) {
    const size_t newline = text.rfind('\n');
    const std::string_view last = newline == std::string_view::npos ? text : text.substr(newline + 1);
    if (!trim(last).empty()) return text;
    if (newline == std::string_view::npos) return {};
    text = text.substr(0, newline);
  }
}

// The next line of `rest` (without its '\n'), consumed from it.
std::string_view next_line(std::string_view& rest) {
  const size_t newline = rest.find('\n');
  const std::string_view line = rest.substr(0, newline);
  rest.remove_prefix(newline == std::string_view::npos ? rest.size() : newline + 1);
  return line;
}

std::string where(size_t line, size_t column) {
  return "line " + std::to_string(line) + ", column " + std::to_string(column);
}

}  // namespace

Dataset parse_csv(std::string_view text, const std::string& name) {
  // Lines are walked in place, not collected: a vector of them cost 16
  // bytes per line, 16 times the text for a file of blank lines.
  std::string_view rest = without_trailing_blank_lines(text);
  if (rest.empty()) throw DataError(name, "empty CSV file: no data rows");
  const size_t line_count = static_cast<size_t>(std::count(rest.begin(), rest.end(), '\n')) + 1;

  // A header is a first line with any field that is not a number.
  double ignored;
  const std::vector<std::string_view> first = split_fields(next_line(rest));
  const bool has_header =
      std::any_of(first.begin(), first.end(), [&](std::string_view f) { return !parse_number(f, ignored); });
  const size_t fields = first.size();
  if (fields < 2) {
    throw DataError(name, "line 1: need at least 2 fields (features, then the label), found " + std::to_string(fields));
  }

  Dataset data;
  data.features = fields - 1;
  data.source = "CSV " + name;
  data.labels_file = name;
  data.labels_first_line = has_header ? 2 : 1;
  // Room for every row, but never more than the text can hold (a value
  // takes at least 2 bytes, "1,"): a wide first line over many short lines
  // must not reserve rows x fields up front.
  data.x.reserve(std::min((line_count - has_header) * data.features, text.size() / 2 + 1));
  if (!has_header) rest = without_trailing_blank_lines(text);  // the first line is data: walk it again
  for (size_t line_no = has_header ? 2 : 1; line_no <= line_count; ++line_no) {
    const std::string_view line = next_line(rest);
    const std::vector<std::string_view> row = split_fields(line);
    if (row.size() != fields) {
      throw DataError(name, "line " + std::to_string(line_no) + ": expected " + std::to_string(fields) +
                                " fields, found " + std::to_string(row.size()) +
                                (trim(line).empty() ? " (blank line)" : ""));
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
  return naming_out_of_memory(path, [&] {
    const std::vector<uint8_t> bytes = read_data_file(path);
    return parse_csv(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), path);
  });
}

}  // namespace ddp
