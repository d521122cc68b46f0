// cuda_test_upload_slots.cpp: the asynchronous batch upload on a GPU
// (kernels/cuda/cuda_upload_slots.h) and the batch loader on top of it. Batches
// stream through the two slots while the compute stream is held back by
// host functions that sleep on it (a cudaLaunchHostFunc blocks its stream
// until it returns), so the copy stream runs ahead as far as the events let
// it. Each batch is fresh random data; the compute stream snapshots its
// slot twice (as soon as the batch is waited for, and again after a delay)
// into poisoned memory, and every snapshot must equal the batch. A missing
// wait shows up as a snapshot of the wrong batch:
//   (a) compute does not wait for the copy: the first snapshot is stale;
//   (b) the copy does not wait for compute to release the slot: the batch
//       two later lands in the slot during the delay, the second snapshot
//       differs;
//   (c) the host rewrites pinned staging before its copy ran: a batch
//       arrives with the data of the batch two later.
// TheStreamTestCatchesEachMissingWait leaves each wait out in turn
// (CudaUploadSlots::skip_wait_for_testing) to show the test can fail.
// The loader cases stream feature batches and token batches (token ids and
// per-position labels). Skips where no GPU is visible.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime.h>

#include "kernels/buffer.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_upload_slots.h"
#include "trainer/data/batch_loader.h"
#include "support/test_support.h"
#include "support/gpu_test.h"

namespace ddp {
namespace {

void CUDART_CB sleep_on_stream(void* microseconds) {
  std::this_thread::sleep_for(std::chrono::microseconds(reinterpret_cast<uintptr_t>(microseconds)));
}

// Holds `stream` back for `microseconds` before the work queued after this.
void delay_stream(cudaStream_t stream, uintptr_t microseconds) {
  if (microseconds == 0) return;
  DDP_CUDA_CHECK(cudaLaunchHostFunc(stream, sleep_on_stream, reinterpret_cast<void*>(microseconds)));
}

class CudaUpload : public test::GpuTest {
 protected:
  CudaUpload() : rng(test::test_seed()) {}
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    gpu = std::make_unique<CudaBackend>(0);
  }
  // 0 (back to back: where a missing wait for the copy shows) or a delay
  // long against a slot's copy (where a missing wait for the release shows).
  uintptr_t random_delay_us() { return rng() % 3 == 0 ? 0 : 300 + rng() % 700; }

  std::unique_ptr<CudaBackend> gpu;
  std::mt19937_64 rng;
};

TEST_F(CudaUpload, StagingIsPinnedAndSlotsStayPut) {
  auto slots = gpu->make_upload_slots(size_t{1} << 20);
  for (int s = 0; s < UploadSlots::kSlotCount; ++s) {
    void* device = slots->device_slot(s);
    cudaPointerAttributes attributes{};
    DDP_CUDA_CHECK(cudaPointerGetAttributes(&attributes, slots->begin_fill(s)));
    EXPECT_EQ(attributes.type, cudaMemoryTypeHost) << "slot " << s << ": staging is not page-locked";
    slots->end_fill(s);
    DDP_CUDA_CHECK(cudaPointerGetAttributes(&attributes, device));
    EXPECT_EQ(attributes.type, cudaMemoryTypeDevice) << "slot " << s;
    EXPECT_EQ(slots->device_slot(s), device);
  }
  EXPECT_NE(slots->device_slot(0), slots->device_slot(1));
}

// Streams kBatches batches of fresh random words through the two slots, one
// ahead, as the trainer does; returns how many of the 2 x kBatches snapshots
// did not hold their batch (reporting the first few).
int stream_batches(CudaBackend& gpu, UploadSlots& slots, std::mt19937_64& rng, bool report) {
  // 256 KiB a slot: its copy (~10-20 us) and the host's fill (~0.1 ms) are
  // short against the compute stream's delays (0.3-1 ms, two in three
  // batches), so the host and the copy stream run ahead as far as the
  // events let them: where a wait is missing, they overtake.
  constexpr size_t kSlotWords = size_t{1} << 16;
  constexpr int kBatches = 64;
  const size_t slot_bytes = kSlotWords * sizeof(uint32_t);
  DDP_REQUIRE(slots.slot_bytes() >= slot_bytes, "slots too small for the test");
  const cudaStream_t compute = gpu.compute_stream();
  // [batch][as soon as waited for, after the delay][kSlotWords], poisoned.
  Buffer<uint32_t> snapshots(gpu, size_t{kBatches} * 2 * kSlotWords);
  DDP_CUDA_CHECK(cudaMemsetAsync(snapshots.data(), 0xA5, snapshots.size_bytes(), compute));
  std::vector<std::vector<uint32_t>> sent(kBatches);
  std::vector<uintptr_t> delay_us(kBatches);
  for (auto& d : delay_us) d = rng() % 3 == 0 ? 0 : 300 + rng() % 700;

  auto fill = [&](int batch) {
    const int s = batch % UploadSlots::kSlotCount;
    uint32_t* staging = static_cast<uint32_t*>(slots.begin_fill(s));
    sent[batch].resize(kSlotWords);
    uint64_t x = rng();  // splitmix64: fresh words, fast enough not to hold the host back
    for (auto& w : sent[batch]) {
      uint64_t z = (x += 0x9e3779b97f4a7c15ull);
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      w = static_cast<uint32_t>(z ^ (z >> 31));
    }
    std::memcpy(staging, sent[batch].data(), slot_bytes);
    // Two ranges, as the batch loader copies features and labels.
    slots.copy(s, 0, slot_bytes / 2);
    slots.copy(s, slot_bytes / 2, slot_bytes / 2);
    slots.end_fill(s);
  };
  fill(0);
  for (int batch = 0; batch < kBatches; ++batch) {
    const int s = batch % UploadSlots::kSlotCount;
    if (batch > 0) slots.release((batch - 1) % UploadSlots::kSlotCount);
    slots.wait_filled(s);
    uint32_t* first = snapshots.data() + size_t{2} * batch * kSlotWords;
    gpu.copy_on_device(first, slots.device_slot(s), slot_bytes);
    delay_stream(compute, delay_us[batch]);
    gpu.copy_on_device(first + kSlotWords, slots.device_slot(s), slot_bytes);
    // One batch ahead, as the trainer prefetches after queuing a step.
    if (batch + 1 < kBatches) fill(batch + 1);
  }
  const std::vector<uint32_t> got = snapshots.download();  // waits for the compute stream
  int bad = 0;
  for (int batch = 0; batch < kBatches; ++batch)
    for (int which = 0; which < 2; ++which) {
      const uint32_t* snapshot = got.data() + (size_t{2} * batch + which) * kSlotWords;
      if (std::memcmp(snapshot, sent[batch].data(), slot_bytes) != 0 && bad++ < 5 && report)
        ADD_FAILURE() << "batch " << batch << " (slot " << batch % 2 << "), "
                      << (which == 0 ? "as soon as it was waited for" : "after the delay")
                      << ": the slot did not hold the batch";
    }
  return bad;
}

TEST_F(CudaUpload, EveryBatchArrivesIntactWhileTheComputeStreamIsBusy) {
  auto slots = gpu->make_upload_slots(size_t{1} << 18);
  const int bad = stream_batches(*gpu, *slots, rng, /*report=*/true);
  EXPECT_EQ(bad, 0) << bad << " snapshots wrong";
}

TEST_F(CudaUpload, TheStreamTestCatchesEachMissingWait) {
  // The test above can fail: with the copy's wait for the release (b) or
  // the host's wait for the copy (c) left out, batches are overwritten. A
  // missing compute-stream wait (a) shows only when a copy is slower than
  // the back-to-back snapshots, so it is reported, not required.
  using Wait = CudaUploadSlots::Wait;
  for (Wait wait : {Wait::CopyWaitsForRelease, Wait::HostWaitsForCopy, Wait::ComputeWaitsForCopy}) {
    CudaUploadSlots slots(gpu->compute_stream(), size_t{1} << 18);
    slots.skip_wait_for_testing(wait);
    const int bad = stream_batches(*gpu, slots, rng, /*report=*/false);
    if (wait == Wait::ComputeWaitsForCopy) {
      std::printf("without the compute stream's wait for the copy: %d wrong snapshots\n", bad);
    } else {
      EXPECT_GT(bad, 0) << "a missing " << (wait == Wait::CopyWaitsForRelease ? "(b)" : "(c)")
                        << " wait went unnoticed";
    }
  }
}

TEST_F(CudaUpload, BatchLoaderPrefetchesIntactBatches) {
  // The loader on the GPU, prefetching one batch ahead (now and then the
  // wrong one), the compute stream delayed: each batch's device contents are
  // its rows, read on the compute stream after the delay.
  Dataset d;
  d.count = 3000;
  d.features = 96;
  d.num_classes = 10;
  d.x = test::random_floats(rng, d.count * d.features);
  d.labels = test::random_labels(rng, d.count, d.num_classes);
  constexpr int kMaxBatch = 256;
  BatchLoader loader(*gpu, d, kMaxBatch);
  auto random_batch = [&] {
    std::vector<uint32_t> idx(1 + rng() % kMaxBatch);
    for (auto& i : idx) i = static_cast<uint32_t>(rng() % d.count);
    return idx;
  };
  Buffer<lowp16> features(*gpu, size_t{kMaxBatch} * d.features);
  Buffer<int32_t> labels(*gpu, kMaxBatch);
  std::vector<uint32_t> next = random_batch();
  for (int i = 0; i < 60; ++i) {
    const std::vector<uint32_t> batch = next;
    next = random_batch();
    const int rows = static_cast<int>(batch.size());
    const DeviceBatch b = loader.load(batch.data(), rows);
    delay_stream(gpu->compute_stream(), random_delay_us());
    gpu->copy_on_device(features.data(), b.features_lowp, sizeof(lowp16) * rows * d.features);
    gpu->copy_on_device(labels.data(), b.labels, sizeof(int32_t) * rows);
    if (rng() % 8 == 0) {
      const std::vector<uint32_t> wrong = random_batch();
      loader.prefetch(wrong.data(), static_cast<int>(wrong.size()));
    } else {
      loader.prefetch(next.data(), static_cast<int>(next.size()));
    }
    const std::vector<lowp16> f = features.download();
    const std::vector<int32_t> l = labels.download();
    for (int r = 0; r < rows; ++r) {
      ASSERT_EQ(l[r], d.labels[batch[r]]) << "batch " << i << " row " << r;
      for (size_t c = 0; c < d.features; ++c)
        ASSERT_EQ(f[r * d.features + c].bits, to_half(d.x[batch[r] * d.features + c]).bits)
            << "batch " << i << " row " << r << " feature " << c;
    }
  }
  EXPECT_GT(loader.counts().loads - loader.counts().loaded_on_demand, 40);  // most batches were prefetched
}

TEST_F(CudaUpload, BatchLoaderPrefetchesIntactTokenBatches) {
  // As above on token data: windows of T token ids and one label per
  // position, read on the compute stream after the delay into poisoned
  // buffers, must equal the host rows.
  Dataset d;
  d.count = 3000;
  d.tokens_per_sample = 64;
  d.vocab_size = 5000;
  d.num_classes = 5000;
  const size_t t = d.tokens_per_sample;
  d.token_ids = test::random_labels(rng, d.count * t, d.vocab_size);
  d.labels = test::random_labels(rng, d.count * t, d.num_classes);
  constexpr int kMaxBatch = 64;
  BatchLoader loader(*gpu, d, kMaxBatch);
  auto random_batch = [&] {
    std::vector<uint32_t> idx(1 + rng() % kMaxBatch);
    for (auto& i : idx) i = static_cast<uint32_t>(rng() % d.count);
    return idx;
  };
  Buffer<int32_t> ids(*gpu, kMaxBatch * t), labels(*gpu, kMaxBatch * t);
  std::vector<uint32_t> next = random_batch();
  for (int i = 0; i < 60; ++i) {
    const std::vector<uint32_t> batch = next;
    next = random_batch();
    const int rows = static_cast<int>(batch.size());
    DDP_CUDA_CHECK(cudaMemsetAsync(ids.data(), 0xA5, ids.size_bytes(), gpu->compute_stream()));
    DDP_CUDA_CHECK(cudaMemsetAsync(labels.data(), 0xA5, labels.size_bytes(), gpu->compute_stream()));
    const DeviceBatch b = loader.load(batch.data(), rows);
    ASSERT_NE(b.token_ids, nullptr);
    ASSERT_EQ(b.labels_per_row, static_cast<int>(t));
    delay_stream(gpu->compute_stream(), random_delay_us());
    gpu->copy_on_device(ids.data(), b.token_ids, sizeof(int32_t) * rows * t);
    gpu->copy_on_device(labels.data(), b.labels, sizeof(int32_t) * rows * t);
    if (rng() % 8 == 0) {
      const std::vector<uint32_t> wrong = random_batch();
      loader.prefetch(wrong.data(), static_cast<int>(wrong.size()));
    } else {
      loader.prefetch(next.data(), static_cast<int>(next.size()));
    }
    const std::vector<int32_t> got_ids = ids.download(), got_labels = labels.download();
    for (int r = 0; r < rows; ++r)
      for (size_t p = 0; p < t; ++p) {
        const std::string where =
            "batch " + std::to_string(i) + " row " + std::to_string(r) + " position " + std::to_string(p);
        ASSERT_EQ(got_ids[r * t + p], d.token_ids[batch[r] * t + p]) << "token id, " << where;
        ASSERT_EQ(got_labels[r * t + p], d.labels[batch[r] * t + p]) << "label, " << where;
      }
  }
  EXPECT_GT(loader.counts().loads - loader.counts().loaded_on_demand, 40);  // most batches were prefetched
}

}  // namespace
}  // namespace ddp
