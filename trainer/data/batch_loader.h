// batch_loader.h: gathers a batch of samples (by index) from a host data set
// into device memory: features as FP16 [rows, D] or token ids as int32
// [rows, T], and class labels as int32 ([rows], or [rows, T] for token data)
// or regression targets as FP32 [rows, K]. Features are rounded to FP16 once
// at construction, so a batch only gathers and copies. Every part is a
// fixed number of bytes per sample, gathered and copied by the same loop
// (the upload slots move bytes and know no element types).
//
// One batch ahead: prefetch(next) gathers the next batch into the pinned
// staging of the slot the current batch does not use and queues its copy on
// the copy stream (kernels/upload_slots.h), while the compute stream still
// works on the current batch; load(next) then finds it there and only
// orders the compute stream after the copy. load() always returns exactly
// the rows asked for: a prefetch of other rows is a wasted copy, never a
// wrong batch, so prefetching cannot change what training computes.
//
// The two slots' device addresses are fixed for the life of the loader
// (a batch's pointers are slot base + fixed offsets): steady-state training
// allocates nothing. The copies are queued by the host between steps,
// outside any CUDA graph capture.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/backend.h"
#include "trainer/data/dataset.h"

namespace ddp {

// Device pointers of the current batch; valid for work queued until the
// next load() (after it the slot may be refilled, two batches later).
struct DeviceBatch {
  const lowp16* features_lowp = nullptr;  // [rows, D]; null for token data
  const int32_t* token_ids = nullptr;     // [rows, T]; null for feature data
  const int32_t* labels = nullptr;        // [rows, labels_per_row]; null for regression
  const float* targets_fp32 = nullptr;    // [rows, K]; null for classification
  int rows = 0;
  // Labels per row: 1 for feature data, T (Dataset::tokens_per_sample, one
  // per position) for token data; labels holds rows * labels_per_row.
  int labels_per_row = 1;
};

// What the loader did, for tests and diagnostics.
struct BatchLoaderCounts {
  int64_t loads = 0;             // load() calls
  int64_t copies = 0;            // batches gathered and copied to a slot
  int64_t loaded_on_demand = 0;  // load()s that found their rows in no slot: gathered on the critical path
};

class BatchLoader {
 public:
  // `data` (validated) must outlive the loader: batches are gathered from
  // its token ids, labels and targets in place.
  BatchLoader(Backend& backend, const Dataset& data, int max_batch);

  // Starts bringing samples indices[0..rows) to the device, one batch ahead
  // of the current one. Nothing to do when a slot already holds those rows
  // (a one-batch data set, as --bench uses). A second prefetch before the
  // next load() replaces the first.
  void prefetch(const uint32_t* indices, int rows);
  // Makes samples indices[0..rows) the current batch: the prefetched slot
  // when it holds them, else the slot the current batch is in when it does
  // (no copy), else gathered and copied now. The compute stream waits for
  // the batch's copy; the previous batch's slot is released to the copy
  // stream (work queued before this call was its last reader).
  DeviceBatch load(const uint32_t* indices, int rows);

  // The current batch's device pointers (as load() returned them).
  const lowp16* features() const { return current_batch_.features_lowp; }
  const int32_t* token_ids() const { return current_batch_.token_ids; }
  const int32_t* labels() const { return current_batch_.labels; }
  const float* targets() const { return current_batch_.targets_fp32; }
  int max_batch() const { return max_batch_; }
  const BatchLoaderCounts& counts() const { return counts_; }

 private:
  static constexpr int kNoSlot = -1;

  int slot_holding(const uint32_t* indices, int rows) const;
  int other_slot() const { return current_slot_ == 0 ? 1 : 0; }
  // Gathers the rows into the slot's staging and queues their copy.
  void fill(int slot, const uint32_t* indices, int rows);
  DeviceBatch batch_in(int slot, int rows);

  // One per-sample array a batch carries (features, token ids, labels or
  // targets): each sample's row is row_bytes at host_rows + i * row_bytes,
  // gathered into [max_batch, row_bytes] at offset_bytes in a slot.
  // row_bytes 0: not in this data set.
  struct Part {
    const char* host_rows = nullptr;
    size_t row_bytes = 0;
    size_t offset_bytes = 0;
    const void* in(void* slot_base) const {
      return row_bytes ? static_cast<const char*>(slot_base) + offset_bytes : nullptr;
    }
  };
  enum PartIndex { kFeatures, kTokenIds, kLabels, kTargets, kPartCount };

  int max_batch_;
  int labels_per_row_;
  std::vector<lowp16> host_features_lowp_;  // whole data set, [count, D]; empty for token data
  // Slot layout, in this order, each part 256-byte aligned: features
  // [max_batch, D] FP16, token ids [max_batch, T] int32, labels
  // [max_batch, labels_per_row] int32, targets [max_batch, K] FP32.
  std::array<Part, kPartCount> parts_;
  std::unique_ptr<UploadSlots> slots_;
  // The indices each slot holds or is being copied (filled: it holds some).
  std::array<std::vector<uint32_t>, UploadSlots::kSlotCount> held_;
  std::array<bool, UploadSlots::kSlotCount> filled_{};
  int current_slot_ = kNoSlot;
  DeviceBatch current_batch_;
  BatchLoaderCounts counts_;
};

}  // namespace ddp
