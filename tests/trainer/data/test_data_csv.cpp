// test_data_csv.cpp: the CSV reader (header, blank lines, gzipped files) and
// its refusal of ragged rows, non-numeric fields and bad labels with one
// line naming the file, line and column.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/data_file_support.h"
#include "trainer/data/csv_reader.h"
#include "trainer/data/dataset.h"

namespace ddp {
namespace {

using namespace test;  // data_file_support.h: file builders, expect_data_error

// ---- CSV ------------------------------------------------------------------------

TEST(DataCsv, ParsesHeaderRowsAndTrailingBlankLines) {
  const Dataset data = parse_csv("f0,f1,label\n1,2,0\n3.5, -4e-1 ,2\r\n+0.25,1e3,1\n\n \n", "d.csv");
  EXPECT_EQ(data.count, 3u);
  EXPECT_EQ(data.features, 2u);
  EXPECT_EQ(data.x, (std::vector<float>{1, 2, 3.5f, -0.4f, 0.25f, 1000}));
  EXPECT_EQ(data.labels, (std::vector<int32_t>{0, 2, 1}));
  EXPECT_EQ(data.num_classes, 3);
  EXPECT_TRUE(data.is_classification());
}

TEST(DataCsv, ParsesWithoutHeaderOrFinalNewline) {
  const Dataset data = parse_csv("1,2,3,4\n5,6,7,8", "d.csv");
  EXPECT_EQ(data.count, 2u);
  EXPECT_EQ(data.features, 3u);
  EXPECT_EQ(data.labels, (std::vector<int32_t>{4, 8}));
  EXPECT_EQ(data.num_classes, 9);
}

TEST(DataCsv, LoadsFileAndGzippedFile) {
  const std::string text = "a,b,y\n0.5,1,1\n2,3,0\n";
  const std::string plain = write_temp("d.csv", text_bytes(text));
  const std::string gz = write_temp("d.csv.gz", gzip(text_bytes(text)));
  for (const std::string& path : {plain, gz}) {
    const Dataset data = load_csv_dataset(path);
    EXPECT_EQ(data.x, (std::vector<float>{0.5f, 1, 2, 3}));
    EXPECT_EQ(data.labels, (std::vector<int32_t>{1, 0}));
  }
  const std::string missing = temp_file("missing.csv");
  expect_data_error([&] { load_csv_dataset(missing); }, {missing, "cannot open"});
}

TEST(DataCsvErrors, RaggedRowsNameTheLine) {
  expect_data_error([&] { parse_csv("a,b,y\n1,2,0\n1,2\n", "r.csv"); },
                    {"r.csv", "line 3", "expected 3 fields, found 2"});
  expect_data_error([&] { parse_csv("1,2,0\n1,2,0,4\n", "r.csv"); }, {"r.csv", "line 2", "found 4"});
  expect_data_error([&] { parse_csv("1,2,0\n\n1,2,0\n", "r.csv"); }, {"r.csv", "line 2", "blank line"});
}

TEST(DataCsvErrors, NonNumericFieldNamesLineAndColumn) {
  expect_data_error([&] { parse_csv("a,b,y\n1,2,0\n1,x2,1\n", "n.csv"); },
                    {"n.csv: line 3, column 2: non-numeric field 'x2'"});
  expect_data_error([&] { parse_csv("a,b,y\n1,,0\n", "n.csv"); }, {"n.csv", "line 2, column 2", "non-numeric"});
}

TEST(DataCsvErrors, BadLabels) {
  expect_data_error([&] { parse_csv("1,2,0.5\n", "l.csv"); }, {"l.csv", "line 1, column 3", "label '0.5'"});
  expect_data_error([&] { parse_csv("1,2,-1\n", "l.csv"); }, {"l.csv", "label '-1'"});
  expect_data_error([&] { parse_csv("1,2,1e12\n", "l.csv"); }, {"l.csv", "label"});
}

// Found by tests/fuzz/fuzz_csv.cpp (minimised input "1,2147483647"): the
// label was accepted and num_classes = label + 1 overflowed an int (UBSan).
TEST(DataCsvErrors, LabelInt32MaxIsRefused) {
  expect_data_error([&] { parse_csv("1,2147483647", "m.csv"); },
                    {"m.csv: line 1, column 2: label '2147483647' is not a non-negative integer below 2^31 - 1"});
  EXPECT_EQ(parse_csv("1,2147483646\n", "m.csv").num_classes, std::numeric_limits<int32_t>::max());
}

TEST(DataCsvErrors, NonFiniteEmptyAndNarrow) {
  expect_data_error([&] { parse_csv("1,2,0\n3,nan,1\n", "f.csv"); }, {"f.csv", "line 2, column 2", "non-finite"});
  expect_data_error([&] { parse_csv("1e39,2,0\n", "f.csv"); }, {"f.csv", "line 1, column 1", "non-finite"});
  expect_data_error([&] { parse_csv("", "e.csv"); }, {"e.csv", "empty"});
  expect_data_error([&] { parse_csv("\n\n", "e.csv"); }, {"e.csv", "empty"});
  expect_data_error([&] { parse_csv("a,b,y\n", "h.csv"); }, {"h.csv", "no data rows"});
  expect_data_error([&] { parse_csv("1\n2\n", "w.csv"); }, {"w.csv", "at least 2 fields"});
}

}  // namespace
}  // namespace ddp
