// batch_loader.h: gathers a batch of samples (by index) from a host data set
// into device buffers: features as FP16 [rows, D], class labels as int32, or
// regression targets as FP32 [rows, K]. Features are rounded to FP16 once at
// construction, so a step only gathers and copies.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/buffer.h"
#include "trainer/dataset.h"

namespace ddp {

class BatchLoader {
 public:
  BatchLoader(Backend& backend, const Dataset& data, int max_batch);

  // Loads samples indices[0..rows) of the data set into the device buffers.
  void load(const uint32_t* indices, int rows);

  const half16* features() const { return features_fp16_.data(); }
  const int32_t* labels() const { return labels_.data(); }
  const float* targets() const { return targets_fp32_.data(); }
  int max_batch() const { return max_batch_; }

 private:
  const Dataset& data_;
  int max_batch_;
  std::vector<half16> host_features_fp16_;  // whole data set, [count, D]
  std::vector<uint32_t> loaded_;            // the indices the device buffers hold
  std::vector<half16> staging_features_;    // one batch, [max_batch, D]
  std::vector<int32_t> staging_labels_;
  std::vector<float> staging_targets_;
  Buffer<half16> features_fp16_;
  Buffer<int32_t> labels_;
  Buffer<float> targets_fp32_;
};

}  // namespace ddp
