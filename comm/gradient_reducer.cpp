// gradient_reducer.cpp
#include "comm/gradient_reducer.h"

#include <algorithm>

#include "kernels/error.h"
#include "kernels/ops/unscale.h"

namespace ddp {

std::vector<GradientBucket> plan_gradient_buckets(const std::vector<GradientSegment>& segments, size_t bucket_bytes,
                                                  size_t first_bucket_bytes) {
  std::vector<GradientBucket> buckets;
  GradientBucket open;
  bool has_open = false;
  size_t open_bytes = 0;  // of its segments, padding not counted
  for (size_t s = 0; s < segments.size(); ++s) {
    const GradientSegment& seg = segments[s];
    if (!has_open) {
      open = GradientBucket{seg.offset, 0, s, s};
      has_open = true;
      open_bytes = 0;
    }
    DDP_REQUIRE(seg.offset >= open.offset + open.count, "plan_gradient_buckets: segments overlap or go backwards");
    open.count = seg.offset + seg.count - open.offset;
    open.end_segment = s + 1;
    open_bytes += seg.count * sizeof(lowp16);
    const size_t cap = buckets.empty() ? first_bucket_bytes : bucket_bytes;
    if (bucket_bytes > 0 && open_bytes >= cap) {
      buckets.push_back(open);
      has_open = false;
    }
  }
  if (has_open) buckets.push_back(open);
  return buckets;
}

GradientReducer::GradientReducer(Communicator& comm, std::vector<GradientSegment> segments, size_t bucket_bytes,
                                 size_t first_bucket_bytes)
    : comm_(comm),
      segments_(std::move(segments)),
      buckets_(plan_gradient_buckets(segments_, bucket_bytes, first_bucket_bytes)),
      bucket_of_segment_(segments_.size()),
      pending_(buckets_.size()),
      ready_(segments_.size()) {
  for (size_t b = 0; b < buckets_.size(); ++b)
    for (size_t s = buckets_[b].first_segment; s < buckets_[b].end_segment; ++s) bucket_of_segment_[s] = b;
}

void GradientReducer::shard_over(const ShardLayout& layout) {
  check_layout_world(comm_, layout, "GradientReducer");
  DDP_REQUIRE(!fp32_, "GradientReducer: shard_over after reduce_in_fp32 (its staging is sized for the mode)");
  bucket_slices_.clear();
  for (const GradientBucket& b : buckets_) {
    DDP_REQUIRE(b.offset + b.count <= layout.total_count(), "GradientReducer: a bucket beyond the shard layout");
    bucket_slices_.push_back(layout.slice(b.offset, b.count));
  }
  shards_ = layout;
}

void GradientReducer::shard_over(const ShardLayout& layout, lowp16* owned,
                                 std::function<lowp16*(size_t bucket)> source) {
  shard_over(layout);
  DDP_REQUIRE(source != nullptr, "GradientReducer: staged buckets without a source");
  owned_ = owned;
  source_ = std::move(source);
}

void GradientReducer::reduce_in_fp32(Backend& backend, float* sums_fp32) {
  const bool empty_range = shards_ && shards_->range(comm_.shard_rank()).count() == 0;
  DDP_REQUIRE(sums_fp32 != nullptr || empty_range, "GradientReducer: FP32 sums without a buffer");
  fp32_ = true;
  backend_ = &backend;
  sums_fp32_ = sums_fp32;
  fp32_staging_.clear();
  next_staging_ = 0;
  if (!shards_) return;  // all-reduced in place in the sums
  size_t largest = 0;
  for (const GradientBucket& b : buckets_) largest = std::max(largest, b.count);
  const size_t count = std::min(kFp32StagingBuffers, buckets_.size());
  for (size_t i = 0; i < count; ++i) fp32_staging_.push_back(Fp32Staging{Buffer<float>(backend, largest)});
}

GradientReducer::Fp32Staging& GradientReducer::next_fp32_staging() {
  Fp32Staging& s = fp32_staging_[next_staging_];
  next_staging_ = (next_staging_ + 1) % fp32_staging_.size();
  if (s.read) comm_.wait_until(s.read_by);  // the collectives after it stay in flight
  return s;
}

void GradientReducer::begin(lowp16* grads) {
  DDP_REQUIRE(grads != nullptr || source_, "GradientReducer::begin without gradients");
  grads_ = grads;
  in_step_ = true;
  next_bucket_ = 0;
  // The previous step's finalize waited for every collective; every step
  // takes the staging buffers in the same order.
  for (Fp32Staging& s : fp32_staging_) s.read = false;
  next_staging_ = 0;
  for (size_t b = 0; b < buckets_.size(); ++b) pending_[b] = buckets_[b].end_segment - buckets_[b].first_segment;
  std::fill(ready_.begin(), ready_.end(), 0);
}

void GradientReducer::mark_ready(size_t first_segment, size_t end_segment) {
  DDP_REQUIRE(in_step_, "GradientReducer::mark_ready outside a step");
  DDP_REQUIRE(first_segment <= end_segment && end_segment <= segments_.size(), "GradientReducer: no such segment");
  for (size_t s = first_segment; s < end_segment; ++s) {
    DDP_REQUIRE(!ready_[s], "GradientReducer: a segment marked ready twice in one step");
    ready_[s] = 1;
    --pending_[bucket_of_segment_[s]];
  }
  start_ready_buckets();
}

void GradientReducer::start_ready_buckets() {
  while (next_bucket_ < buckets_.size() && pending_[next_bucket_] == 0) {
    const GradientBucket& b = buckets_[next_bucket_];
    if (on_ready) on_ready(next_bucket_);
    lowp16* bucket = source_ ? source_(next_bucket_) : grads_ + b.offset;
    if (before_start) before_start(next_bucket_, bucket);
    if (trace_ != nullptr) trace_->tag_next(static_cast<int>(next_bucket_), -1);
    if (fp32_) {
      start_bucket_fp32(b, bucket);
    } else {
      start_bucket_lowp(b, bucket);
    }
    if (trace_ != nullptr) trace_->tag_next(-1, -1);  // a call that opened no record must not pass it on
    elements_started_ += b.count;
    ++next_bucket_;
  }
}

void GradientReducer::start_bucket_lowp(const GradientBucket& b, lowp16* bucket) {
  if (!shards_) {
    comm_.start_allreduce_sum_lowp(bucket, b.count);
    return;
  }
  const ShardLayout& slice = bucket_slices_[next_bucket_];
  const ShardRange mine = slice.range(comm_.shard_rank());
  lowp16* recv = bucket + mine.begin;  // in place
  // Staged: into the owned range, at the bucket's share of it (an empty
  // share lands nowhere: any address of the range will do).
  if (source_)
    recv = owned_ + (mine.count() > 0 ? b.offset + mine.begin - shards_->range(comm_.shard_rank()).begin : 0);
  comm_.start_reduce_scatter_sum_lowp(bucket, recv, slice);
}

namespace {

// The bucket's 16-bit sums widened to FP32, exactly (a factor of 1, no check).
void widen_bucket(Backend& backend, const lowp16* bucket, float* sums_fp32, size_t count) {
  UnscaleLowpToFp32 widen;
  widen.grads_lowp = bucket;
  widen.grads_fp32 = sums_fp32;
  widen.count = count;
  widen.inv_scale = 1.0f;
  unscale_lowp_to_fp32(backend, widen);
}

}  // namespace

// The widening is exact (a factor of 1, no check: the optimizer checks the
// FP32 sums), queued on the backend before the collective that reads it.
// Sharded, the sums land at the bucket's share of the rank's range.
void GradientReducer::start_bucket_fp32(const GradientBucket& b, const lowp16* bucket) {
  if (!shards_) {
    float* sums = sums_fp32_ + b.offset;
    widen_bucket(*backend_, bucket, sums, b.count);
    comm_.start_allreduce_sum_fp32(sums, b.count);
    return;
  }
  const ShardLayout& slice = bucket_slices_[next_bucket_];
  const ShardRange mine = slice.range(comm_.shard_rank());
  Fp32Staging& staging = next_fp32_staging();
  widen_bucket(*backend_, bucket, staging.buffer.data(), b.count);
  // An empty share lands nowhere (the range may be empty too: null).
  float* recv =
      mine.count() > 0 ? sums_fp32_ + (b.offset + mine.begin - shards_->range(comm_.shard_rank()).begin) : sums_fp32_;
  comm_.start_reduce_scatter_sum_fp32(staging.buffer.data(), recv, slice);
  staging.read = true;
  staging.read_by = comm_.mark_started();
}

void GradientReducer::finalize() {
  DDP_REQUIRE(in_step_, "GradientReducer::finalize outside a step");
  for (size_t s = 0; s < segments_.size(); ++s)
    if (!ready_[s]) {
      ready_[s] = 1;
      --pending_[bucket_of_segment_[s]];
    }
  start_ready_buckets();
  comm_.wait_allreduces();
  grads_ = nullptr;
  in_step_ = false;
}

}  // namespace ddp
