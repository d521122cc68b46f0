// csv_reader.h: a classification data set as comma-separated numbers, one
// sample a line, the integer class label last. An optional header line is
// recognised by a non-numeric field; blank lines at the end are ignored.
#pragma once

#include <string>
#include <string_view>

#include "trainer/data/dataset.h"

namespace ddp {

// Parses the whole text. DataError("<name>: line L[, column C]: ...") when a
// field is not a number, a row has a different number of fields than the
// first, or a label is not a non-negative integer.
Dataset parse_csv(std::string_view text, const std::string& name);

// Reads the file (gunzipping it when it is gzip) and parses it.
Dataset load_csv_dataset(const std::string& path);

}  // namespace ddp
