// test_gradient_buckets.cpp: the gradient reducer (comm/gradient_reducer.h):
// its buckets tile the flat buffer in segment order with the caps of the
// plan, and each bucket's all-reduce starts exactly when its last segment
// is marked ready, in bucket order, never before, and finalize() waits; in
// FP32 (--grad-reduce-dtype fp32) each bucket is widened before its sum,
// all-reduced in its place in the sums or, sharded, reduce-scattered from
// the two staging buffers in turn, each reused after its own collective.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "comm/gradient_reducer.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/error.h"
#include "support/lowp_format.h"
#include "support/test_support.h"

namespace ddp {
namespace {

using test::LowpFormat;

// Segments of these sizes, each at a multiple of 8 elements (as the
// parameter registry places tensors).
std::vector<GradientSegment> aligned_segments(const std::vector<size_t>& counts) {
  std::vector<GradientSegment> segments;
  size_t at = 0;
  for (size_t c : counts) {
    at = (at + 7) / 8 * 8;
    segments.push_back({at, c});
    at += c;
  }
  return segments;
}

void expect_tiling(const std::vector<GradientSegment>& segments, const std::vector<GradientBucket>& buckets) {
  size_t next_segment = 0;
  for (const GradientBucket& b : buckets) {
    EXPECT_EQ(b.first_segment, next_segment);
    EXPECT_GT(b.end_segment, b.first_segment);
    EXPECT_EQ(b.offset, segments[b.first_segment].offset);
    const GradientSegment& last = segments[b.end_segment - 1];
    EXPECT_EQ(b.offset + b.count, last.offset + last.count);
    next_segment = b.end_segment;
  }
  EXPECT_EQ(next_segment, segments.size());
}

TEST(GradientBuckets, SmallFirstBucketThenCapsOfWholeSegments) {
  // FP16 bytes: 1300, 8320, 8320, 4224. First cap 1000 B, then 10000 B.
  const auto segments = aligned_segments({650, 4160, 4160, 2112});
  const auto b = plan_gradient_buckets(segments, 10000, 1000);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].end_segment, 1u);  // 1300 B >= 1000: the first segment alone
  EXPECT_EQ(b[1].end_segment, 3u);  // 8320 + 8320 >= 10000
  EXPECT_EQ(b[2].end_segment, 4u);  // the rest
  expect_tiling(segments, b);
}

TEST(GradientBuckets, ZeroMeansOneBucketAndHugeSegmentsStandAlone) {
  const auto segments = aligned_segments({10, 10250, 1024, 1048576, 1024, 802816});
  const auto one = plan_gradient_buckets(segments, 0, 1 << 20);
  ASSERT_EQ(one.size(), 1u);
  expect_tiling(segments, one);
  const auto tiny = plan_gradient_buckets(segments, 1, 1);  // every segment exceeds the cap
  ASSERT_EQ(tiny.size(), segments.size());
  expect_tiling(segments, tiny);
}

// Records the collectives as text: "S<offset>+<count>" per start, "W" per wait.
class RecordingCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string name() const override { return "recording"; }
  void allreduce_sum_lowp(lowp16*, size_t) override { log += "A"; }
  void broadcast_bytes(void*, size_t, int) override {}
  double allreduce_sum_host(double v) override { return v; }
  int64_t allreduce_max_host(int64_t v) override { return v; }
  void allreduce_max_int32(int32_t*, size_t) override {}
  void reduce_scatter_sum_lowp(const lowp16*, lowp16*, const ShardLayout&) override { log += "R"; }
  void allgather_lowp(const lowp16*, lowp16*, const ShardLayout&) override { log += "G"; }
  void barrier() override {}
  void start_allreduce_sum_lowp(lowp16* data, size_t count) override {
    log += "S" + std::to_string(data - base) + "+" + std::to_string(count) + " ";
  }
  void wait_allreduces() override { log += "W"; }
  lowp16* base = nullptr;
  std::string log;
};

std::string start_of(const GradientBucket& b) {
  return "S" + std::to_string(b.offset) + "+" + std::to_string(b.count) + " ";
}

TEST(GradientReducer, EachBucketStartsWhenItsLastSegmentIsReadyInOrder) {
  std::mt19937_64 rng(test::test_seed());
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<size_t> counts(2 + rng() % 8);
    for (size_t& c : counts) c = 1 + rng() % 300;
    const auto segments = aligned_segments(counts);
    RecordingCommunicator comm;
    std::vector<lowp16> grads(segments.back().offset + segments.back().count);
    comm.base = grads.data();
    GradientReducer reducer(comm, segments, 2 * (100 + rng() % 400), 2 * (1 + rng() % 200));
    const auto& buckets = reducer.buckets();
    ASSERT_GE(buckets.size(), 1u);
    std::vector<size_t> started_by_hook;
    reducer.before_start = [&](size_t b, lowp16* g) {
      EXPECT_EQ(g, grads.data() + buckets[b].offset);
      started_by_hook.push_back(b);
    };
    reducer.begin(grads.data());
    // Mark segments in random groups, in order, as a backward would.
    std::string want;
    size_t next_bucket = 0;
    for (size_t s = 0; s < segments.size();) {
      const size_t end = std::min(segments.size(), s + 1 + rng() % 3);
      reducer.mark_ready(s, end);
      while (next_bucket < buckets.size() && buckets[next_bucket].end_segment <= end)
        want += start_of(buckets[next_bucket++]);
      ASSERT_EQ(comm.log, want) << "after marking up to segment " << end << " (trial " << trial << ")";
      s = end;
    }
    reducer.finalize();
    EXPECT_EQ(comm.log, want + "W");
    ASSERT_EQ(started_by_hook.size(), buckets.size());
    for (size_t b = 0; b < buckets.size(); ++b) EXPECT_EQ(started_by_hook[b], b);
  }
}

TEST(GradientReducer, ALaterBucketWaitsForTheEarlierOnesAndFinalizeStartsTheRest) {
  const auto segments = aligned_segments({100, 100, 100});
  RecordingCommunicator comm;
  std::vector<lowp16> grads(400);
  comm.base = grads.data();
  GradientReducer reducer(comm, segments, 1, 1);  // one bucket per segment
  ASSERT_EQ(reducer.buckets().size(), 3u);
  reducer.begin(grads.data());
  reducer.mark_ready(2, 3);  // the last bucket is complete, the first two are not: nothing may start
  EXPECT_EQ(comm.log, "");
  reducer.mark_ready(0, 1);
  EXPECT_EQ(comm.log, start_of(reducer.buckets()[0]));
  reducer.finalize();  // segment 1 never reported: started here, then the two in order, then the wait
  EXPECT_EQ(comm.log,
            start_of(reducer.buckets()[0]) + start_of(reducer.buckets()[1]) + start_of(reducer.buckets()[2]) + "W");
  // The next step starts afresh.
  comm.log.clear();
  reducer.begin(grads.data());
  reducer.mark_ready(0, 3);
  EXPECT_EQ(comm.log, start_of(reducer.buckets()[0]) + start_of(reducer.buckets()[1]) + start_of(reducer.buckets()[2]));
  reducer.finalize();
}

// The FP32 sums' calls, as text: "F<k>" a reduce-scatter from staging
// buffer k (in first-use order), "A" an FP32 all-reduce, "U<m>" a wait up
// to mark m, "W" the wait for all; each start checks that its send buffer
// holds the widened bucket and its receive pointer the bucket's place.
class Fp32RecordingCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string name() const override { return "recording"; }
  void allreduce_sum_lowp(lowp16*, size_t) override {}
  void broadcast_bytes(void*, size_t, int) override {}
  double allreduce_sum_host(double v) override { return v; }
  int64_t allreduce_max_host(int64_t v) override { return v; }
  void allreduce_max_int32(int32_t*, size_t) override {}
  void reduce_scatter_sum_lowp(const lowp16*, lowp16*, const ShardLayout&) override {}
  void allgather_lowp(const lowp16*, lowp16*, const ShardLayout&) override {}
  void barrier() override {}
  void start_allreduce_sum_fp32(float* data, size_t count) override {
    check(data, data, count);
    log += "A ";
    ++started;
  }
  void start_reduce_scatter_sum_fp32(const float* send, float* recv, const ShardLayout& layout) override {
    check(send, recv, layout.total_count());
    size_t k = 0;
    while (k < staging.size() && staging[k] != send) ++k;
    if (k == staging.size()) staging.push_back(send);
    log += "F" + std::to_string(k) + " ";
    ++started;
  }
  CollectiveMark mark_started() override { return started; }
  void wait_until(CollectiveMark mark) override { log += "U" + std::to_string(mark) + " "; }
  void wait_allreduces() override { log += "W"; }

  // The bucket each start must carry, in order.
  std::vector<GradientBucket> expected;
  const lowp16* grads = nullptr;
  float* sums = nullptr;
  LowpFormat fmt;
  std::string log;
  std::vector<const float*> staging;
  CollectiveMark started = 0;
  int bad = 0;

 private:
  void check(const float* send, const float* recv, size_t count) {
    const GradientBucket& b = expected[started];
    bad += count != b.count || recv != sums + b.offset;
    for (size_t i = 0; i < b.count; ++i) bad += send[i] != fmt.widen(grads[b.offset + i]);
  }
};

TEST(GradientReducer, Fp32SumsWidenEachBucketAndReuseAStagingBufferAfterItsOwnCollective) {
  std::mt19937_64 rng(test::test_seed());
  for (const Precision p : test::kBothPrecisions) {
    const LowpFormat fmt{p};
    CpuBackend cpu(1, p);
    const auto segments = aligned_segments({100, 37, 300, 5});
    const std::vector<lowp16> grads = fmt.random(rng, segments.back().offset + segments.back().count);
    std::vector<float> sums(grads.size(), 0.0f);
    for (const bool sharded : {false, true}) {
      Fp32RecordingCommunicator comm;
      GradientReducer reducer(comm, segments, 1, 1);  // one bucket per segment: four
      ASSERT_EQ(reducer.buckets().size(), 4u);
      if (sharded) reducer.shard_over(ShardLayout::balanced(grads.size(), 1, 8));
      reducer.reduce_in_fp32(cpu, sums.data());
      EXPECT_THROW(reducer.shard_over(ShardLayout::balanced(grads.size(), 1, 8)), Error) << "after reduce_in_fp32";
      comm.expected = reducer.buckets();
      comm.grads = grads.data();
      comm.sums = sums.data();
      comm.fmt = fmt;
      for (int step = 0; step < 2; ++step) {  // the next step takes the buffers in the same order
        comm.log.clear();
        comm.started = 0;
        reducer.begin(const_cast<lowp16*>(grads.data()));
        reducer.mark_ready(0, segments.size());
        reducer.finalize();
        // Sharded: buffer 0 again for the third bucket after the first
        // one's collective (mark 1) only, buffer 1 after the second's.
        EXPECT_EQ(comm.log, sharded ? "F0 F1 U1 F0 U2 F1 W" : "A A A A W") << precision_name(p) << " step " << step;
        EXPECT_EQ(comm.bad, 0) << precision_name(p) << ": a start without its widened bucket or its place";
      }
      EXPECT_EQ(reducer.fp32_staging_bytes(), sharded ? 2 * 300 * sizeof(float) : 0u);
      EXPECT_EQ(reducer.wire_element_bytes(), sizeof(float));
    }
  }
}

}  // namespace
}  // namespace ddp
