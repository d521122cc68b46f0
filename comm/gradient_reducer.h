// gradient_reducer.h: the bucketed gradient all-reduce, overlapped with
// backward (PyTorch DDP's Reducer, in our terms). It knows segments of a
// flat gradient buffer, (offset, count) in the order backward finishes
// them, and nothing of layers or models.
//
// Buckets are runs of consecutive segments: a bucket closes once it holds
// at least its cap (first_bucket_bytes for the first, small, so
// communication starts early; bucket_bytes after), so a segment larger than
// the cap is a bucket of its own; bucket_bytes == 0 makes one bucket of
// everything (all-reduce after backward, no overlap). A bucket's sum covers
// its slice of the buffer from its first segment's start to its last one's
// end (any padding between them too, which holds zeros).
//
// Per step: begin(), then mark_ready() as backward finishes segments (in
// any grouping); each bucket whose segments are all ready starts at once,
// buckets in order (every rank must start the same collectives in the same
// order); finalize() waits for every started sum (see Communicator::
// wait_allreduces) and checks that every bucket was started.
//
// Sharded (ZeRO, shard_over): a bucket's sum is a reduce-scatter instead,
// in place over the layout's slice of the bucket, so after finalize() the
// calling rank's range of the layout holds the sums (the elements of its
// range no bucket covers are padding: zero on every rank, their own sum)
// and the rest of the buffer is unspecified. The same volume leaves each
// rank as with the all-reduce's first half.
//
// Staged (ZeRO stage 2 and 3): the gradients are not in one whole buffer.
// source(b) gives bucket b's own buffer (its element 0 is element b.offset
// of the layout), and each bucket's sums land in `owned` (the calling
// rank's range of the layout, from its element 0): the rank keeps no
// gradient outside its range beyond the buckets in flight.
//
// FP32 sums (--grad-reduce-dtype fp32, reduce_in_fp32): each bucket's
// 16-bit gradients are widened, exactly, to FP32 when it starts and summed
// in FP32, so the sum over ranks has one rounding per FP32 add instead of
// one to 16 bits per step (llm.c's and torchtitan's FP32 reduction). The
// sums stay FP32 for the optimizer. All-reduced, a bucket is widened into
// its place in the FP32 sums buffer and summed there; sharded, into one of
// kFp32StagingBuffers staging buffers (the largest bucket each), in turn,
// and reduce-scattered from it into the rank's range of the sums. A
// staging buffer is reused once the collective that read it is done: the
// step waits for that one (Communicator::wait_until its mark), not for the
// collectives started after it. Twice the bytes of the sums on the wire,
// and twice the largest bucket in FP32 of memory at the sharded stages.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <vector>

#include "comm/communicator.h"
#include "kernels/backend.h"
#include "kernels/buffer.h"
#include "kernels/half.h"

namespace ddp {

struct GradientSegment {
  size_t offset = 0;  // first element in the flat buffer
  size_t count = 0;   // elements
};

struct GradientBucket {
  size_t offset = 0;         // first element in the flat buffer
  size_t count = 0;          // elements of its slice
  size_t first_segment = 0;  // segments [first_segment, end_segment)
  size_t end_segment = 0;
};

std::vector<GradientBucket> plan_gradient_buckets(const std::vector<GradientSegment>& segments, size_t bucket_bytes,
                                                  size_t first_bucket_bytes);

class GradientReducer {
 public:
  GradientReducer(Communicator& comm, std::vector<GradientSegment> segments, size_t bucket_bytes,
                  size_t first_bucket_bytes);

  const std::vector<GradientBucket>& buckets() const { return buckets_; }

  // From now on each bucket is reduce-scattered over `layout` (of the
  // whole buffer, this communicator's shard group) instead of all-reduced.
  void shard_over(const ShardLayout& layout);
  void shard_over(const ShardLayout& layout, lowp16* owned, std::function<lowp16*(size_t bucket)> source);
  // From now on the sums are FP32 (the header's "FP32 sums"), widened on
  // `backend` and landing in `sums_fp32`: all-reduced, the whole buffer's
  // layout (bucket b at element b.offset); sharded (call shard_over
  // first), the calling rank's range of the layout from its element 0.
  // Elements no bucket covers (padding between buckets or past the last
  // tensor) are never written: they keep what the buffer held (the
  // store's: zero). A rank whose range is empty may pass null. The staging
  // buffers are made here, before any step (a CUDA graph may hold them):
  // call shard_over first.
  void reduce_in_fp32(Backend& backend, float* sums_fp32);
  bool reduces_in_fp32() const { return fp32_; }
  // Bytes of one summed element on the wire: 4 in FP32, else 2.
  size_t wire_element_bytes() const { return reduces_in_fp32() ? sizeof(float) : sizeof(lowp16); }
  static constexpr size_t kFp32StagingBuffers = 2;
  size_t fp32_staging_bytes() const {
    return fp32_staging_.empty() ? 0 : fp32_staging_.size() * fp32_staging_.front().buffer.size_bytes();
  }

  // A step's reduction of `grads` begins: no segment is ready.
  void begin(lowp16* grads);
  // Segments [first, end) are final; starts every bucket that now can.
  void mark_ready(size_t first_segment, size_t end_segment);
  // Starts what is left (segments never marked: a model that reported
  // nothing), then waits for every sum of this step.
  void finalize();

  // Elements this reducer has handed to collectives so far (every bucket's
  // whole slice, all-reduced or reduce-scattered): the volume the benchmark
  // turns into bytes sent per step (wire_element_bytes() each).
  size_t elements_started() const { return elements_started_; }
  // This step's buckets whose collective has started: [0, buckets_started()).
  size_t buckets_started() const { return next_bucket_; }

  // Runs just before bucket b's collective starts, with the bucket's first
  // element (test and fault hooks).
  std::function<void(size_t bucket, lowp16* bucket_first)> before_start;
  // Runs when bucket b is ready, before anything else of its start
  // (--trace's ready marks: before the transport's thread is woken, which
  // on an oversubscribed host may take the caller's core).
  std::function<void(size_t bucket)> on_ready;
  // --trace: each bucket's collective is tagged with its number in `trace`
  // (collective_trace.h; null: not traced).
  void set_trace(CollectiveTrace* trace) { trace_ = trace; }

 private:
  void start_ready_buckets();
  // Bucket b's collective, from its first element `bucket` (16-bit).
  void start_bucket_lowp(const GradientBucket& b, lowp16* bucket);
  void start_bucket_fp32(const GradientBucket& b, const lowp16* bucket);
  // The next staging buffer in turn, once the collective that last read it
  // is done.
  struct Fp32Staging {
    Buffer<float> buffer;
    bool read = false;                         // a collective of this step reads it
    Communicator::CollectiveMark read_by = 0;  // the mark after that collective
  };
  Fp32Staging& next_fp32_staging();

  Communicator& comm_;
  std::optional<ShardLayout> shards_;       // empty: all-reduce
  std::vector<ShardLayout> bucket_slices_;  // sharded: shards_->slice of each bucket, made once
  lowp16* owned_ = nullptr;                 // staged: where this rank's sums land
  std::function<lowp16*(size_t)> source_;   // staged: each bucket's buffer
  std::vector<GradientSegment> segments_;
  std::vector<GradientBucket> buckets_;
  std::vector<size_t> bucket_of_segment_;
  std::vector<size_t> pending_;  // per bucket: segments not yet ready
  std::vector<char> ready_;      // per segment
  size_t next_bucket_ = 0;       // the first bucket not started
  lowp16* grads_ = nullptr;      // staged: the owned range (null when it is empty)
  bool in_step_ = false;
  size_t elements_started_ = 0;
  CollectiveTrace* trace_ = nullptr;  // not owned
  // FP32 sums (reduce_in_fp32): the backend that widens, where the sums
  // land, and the sharded buckets' staging, taken in turn.
  bool fp32_ = false;
  Backend* backend_ = nullptr;  // not owned
  float* sums_fp32_ = nullptr;  // not owned; null where the rank's range is empty
  std::vector<Fp32Staging> fp32_staging_;
  size_t next_staging_ = 0;
};

}  // namespace ddp
