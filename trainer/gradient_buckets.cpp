// gradient_buckets.cpp
#include "trainer/gradient_buckets.h"

#include "kernels/half.h"

namespace ddp {

std::vector<GradientBucket> plan_gradient_buckets(const ParameterLayout& layout, size_t bucket_bytes,
                                                  size_t first_bucket_bytes) {
  std::vector<GradientBucket> buckets;
  GradientBucket open;
  bool has_open = false;
  for (size_t i = layout.layers.size(); i-- > 0;) {
    const LinearSlices& s = layout.layers[i];
    const size_t layer_count = static_cast<size_t>(s.in_features) * s.out_features + s.out_features;
    if (!has_open) open = GradientBucket{s.weight_offset, 0, static_cast<int>(i)}, has_open = true;
    open.count += layer_count;  // [W_i, b_i] follows the layer above it in the flat buffer
    open.lowest_layer = static_cast<int>(i);
    const size_t cap = buckets.empty() ? first_bucket_bytes : bucket_bytes;
    if (bucket_bytes > 0 && open.count * sizeof(half16) >= cap) buckets.push_back(open), has_open = false;
  }
  if (has_open) buckets.push_back(open);
  return buckets;
}

}  // namespace ddp
