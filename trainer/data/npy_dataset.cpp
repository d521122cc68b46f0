// npy_dataset.cpp: the two-file .npy data set: shapes and counts checked
// against each other, values widened to FP32, labels bounded.
#include "trainer/data/npy_dataset.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "trainer/io/data_error.h"
#include "trainer/io/input_file.h"
#include "trainer/io/npy_io.h"

namespace ddp {

Dataset load_npy_dataset(const std::string& x_path, const std::string& y_path) {
  const NpyArray x = read_npy(x_path);
  require_feature_dtype(x, x_path);
  if (x.shape.size() != 2) {
    throw DataError(x_path, "unsupported shape " + npy_shape_text(x.shape) + " for features: expected 2-D [N, D]");
  }
  const NpyArray y = read_npy(y_path);
  if (y.dtype == NpyDtype::u1) {
    throw DataError(y_path, npy_dtype_problem(y, "labels/targets", "'<i4'/'<i8' labels or '<f4'/'<f8' targets"));
  }
  const bool labels = y.is_integer();
  if (y.shape.empty() || y.shape.size() > (labels ? 1u : 2u)) {
    throw DataError(y_path, "unsupported shape " + npy_shape_text(y.shape) +
                                (labels ? " for labels: expected 1-D [N]" : " for targets: expected [N, K] or [N]"));
  }
  if (y.shape[0] != x.shape[0]) {
    throw DataError(y_path, "count mismatch: " + std::to_string(y.shape[0]) + (labels ? " labels" : " targets") +
                                " for " + std::to_string(x.shape[0]) + " samples in " + x_path);
  }

  Dataset data;
  data.count = x.shape[0];
  data.features = x.shape[1];
  require_within_limit(x_path, x.count() * sizeof(float), input_limit_bytes(), "the features as FP32");
  data.x = naming_out_of_memory(x_path, [&] { return npy_values_as_float(x); });
  data.source = "npy x " + x_path + ", y " + y_path;
  if (labels) {
    data.labels_file = y_path;
    const std::vector<int64_t> values = naming_out_of_memory(y_path, [&] { return npy_values_as_int(y); });
    data.labels.resize(values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      // num_classes = label + 1 must fit an int: 2^31 - 1 itself overflowed
      // it (fuzz_npy, UBSan).
      if (values[i] < 0 || values[i] >= std::numeric_limits<int32_t>::max()) {
        throw DataError(y_path, "bad label " + std::to_string(values[i]) + " in sample " + std::to_string(i) +
                                    ": labels must be in [0, 2^31 - 1)");
      }
      data.labels[i] = static_cast<int32_t>(values[i]);
      data.num_classes = std::max(data.num_classes, data.labels[i] + 1);
    }
  } else {
    data.target_dim = y.shape.size() == 2 ? y.shape[1] : 1;
    require_within_limit(y_path, y.count() * sizeof(float), input_limit_bytes(), "the targets as FP32");
    data.targets = naming_out_of_memory(y_path, [&] { return npy_values_as_float(y); });
    // Named here so a NaN target points at the y file, not the x file.
    if (data.target_dim != 0) require_finite(data.targets, data.target_dim, y_path, "target");
  }
  validate_dataset(data, x_path);
  return data;
}

}  // namespace ddp
