// dataset.cpp: validate_dataset, the one shape and value check shared by
// every reader, so a data set the trainer sees is always consistent (both
// forms: features with labels or targets, token ids with per-position labels).
#include "trainer/data/dataset.h"

#include <cmath>

#include "trainer/io/data_error.h"

namespace ddp {

namespace {

std::string count_text(size_t n, const char* what) { return std::to_string(n) + " " + what; }

// Every value of `values` ([samples, per_sample]) in [0, limit), else the
// first one outside named by sample and position: "bad token id 70 in
// sample 3, position 5: not below vocab_size 64".
void require_in_range(const std::vector<int32_t>& values, size_t per_sample, int limit, const std::string& name,
                      const std::string& what, const char* limit_name) {
  for (size_t i = 0; i < values.size(); ++i) {
    const int32_t v = values[i];
    if (v >= 0 && v < limit) continue;
    throw DataError(name, "bad " + what + " " + std::to_string(v) + " in sample " + std::to_string(i / per_sample) +
                              ", position " + std::to_string(i % per_sample) +
                              (v < 0 ? ": " + what + "s must be >= 0"
                                     : std::string(": not below ") + limit_name + " " + std::to_string(limit)));
  }
}

void validate_token_data(const Dataset& data, const std::string& name) {
  const size_t t = data.tokens_per_sample;
  if (data.features != 0 || !data.x.empty()) throw DataError(name, "bad data set: has both features and token ids");
  if (t == 0) throw DataError(name, "bad shape: samples have 0 token ids (tokens_per_sample is 0)");
  const std::string shape = std::to_string(data.count) + "x" + std::to_string(t);
  if (data.token_ids.size() != data.count * t)
    throw DataError(name, "shape mismatch: " + count_text(data.token_ids.size(), "token ids") + " for " + shape);
  if (!data.targets.empty() || data.target_dim != 0) {
    throw DataError(name,
                    "bad data set: token data has regression targets (its targets are class labels, one per "
                    "position)");
  }
  if (data.labels.size() != data.count * t) {
    throw DataError(name, "count mismatch: " + count_text(data.labels.size(), "labels") + " for " + shape +
                              " token positions (one label per position)");
  }
  if (data.vocab_size <= 0)
    throw DataError(name, "bad data set: vocab_size " + std::to_string(data.vocab_size) + " (must be at least 1)");
  // Ids are below the tokenizer's vocabulary; the padded classes above it are outputs only.
  if (data.real_vocab_size < 0 || data.real_vocab_size > data.vocab_size)
    throw DataError(name, "bad data set: real_vocab_size " + std::to_string(data.real_vocab_size) +
                              " outside [0, vocab_size " + std::to_string(data.vocab_size) + "]");
  if (data.real_vocab_size > 0 && data.real_vocab_size < data.vocab_size)
    require_in_range(data.token_ids, t, data.real_vocab_size, name, "token id", "real_vocab_size");
  else
    require_in_range(data.token_ids, t, data.vocab_size, name, "token id", "vocab_size");
  require_in_range(data.labels, t, data.num_classes, name, "label", "num_classes");
}

}  // namespace

std::string label_place(const Dataset& data, size_t i) {
  const std::string file = data.labels_file.empty() ? data.source : data.labels_file;
  if (data.labels_first_line == 0) return file + ": sample " + std::to_string(i);
  // The label is the last field of its line, after the features.
  return file + ": line " + std::to_string(data.labels_first_line + i) + ", column " +
         std::to_string(data.features + 1);
}

void require_finite(const std::vector<float>& values, size_t width, const std::string& name, const char* column_word) {
  for (size_t i = 0; i < values.size(); ++i) {
    const float v = values[i];
    // One compare per element on the fast path; 47M pixels check in ~20 ms.
    if (std::isfinite(v)) continue;
    const char* kind = std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
    throw DataError(name, std::string("non-finite value (") + kind + ") in sample " + std::to_string(i / width) + ", " +
                              column_word + " " + std::to_string(i % width));
  }
}

void validate_dataset(const Dataset& data, const std::string& name) {
  if (data.count == 0) throw DataError(name, "empty data set: no samples");
  if (data.is_token_data()) return validate_token_data(data, name);
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
