// gradient_buckets.h: the all-reduce buckets over the flat FP16 gradient
// buffer. The buffer is in reverse layer order (parameter_store.h), the
// order backward finishes layers, so a bucket is a run of whole consecutive
// layers from the last one down: it is complete the moment backward has
// written its lowest layer, and its all-reduce can start while backward
// goes on with the layers below (PyTorch DDP's scheme: a small first bucket,
// so communication starts early, then buckets of about --bucket-mb).
#pragma once

#include <cstddef>
#include <vector>

#include "trainer/parameter_store.h"

namespace ddp {

struct GradientBucket {
  size_t offset = 0;     // first element in the flat buffers
  size_t count = 0;      // elements
  int lowest_layer = 0;  // forward index of the layer whose gradient completes it
};

// Layers are added from the last to the first; a bucket closes once it holds
// at least its cap (first_bucket_bytes for the first, bucket_bytes after),
// so a layer larger than the cap is a bucket of its own. bucket_bytes == 0:
// one bucket of everything (all-reduce after backward, no overlap).
std::vector<GradientBucket> plan_gradient_buckets(const ParameterLayout& layout, size_t bucket_bytes,
                                                  size_t first_bucket_bytes);

}  // namespace ddp
