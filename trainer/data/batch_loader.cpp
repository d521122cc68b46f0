// batch_loader.cpp
#include "trainer/data/batch_loader.h"

#include <algorithm>
#include <cstring>

#include "kernels/error.h"
#include "kernels/lowp_convert.h"

namespace ddp {
namespace {
// Each region of a slot starts on a 256-byte boundary (cudaMalloc's
// alignment), so every pointer handed to a kernel is as aligned as a Buffer's.
size_t align_up(size_t size_bytes) { return (size_bytes + 255) / 256 * 256; }
}  // namespace

BatchLoader::BatchLoader(Backend& backend, const Dataset& data, int max_batch)
    : max_batch_(max_batch),
      labels_per_row_(static_cast<int>(data.labels_per_sample())),
      host_features_lowp_(data.x.size()) {
  DDP_REQUIRE(max_batch > 0, "BatchLoader: max_batch must be positive");
  float_to_lowp_array(backend.precision(), data.x.data(), host_features_lowp_.data(), data.x.size());
  // Absent parts have no rows: empty vectors, 0 bytes a row.
  parts_[kFeatures] = {reinterpret_cast<const char*>(host_features_lowp_.data()), data.features * sizeof(lowp16)};
  parts_[kTokenIds] = {reinterpret_cast<const char*>(data.token_ids.data()), data.tokens_per_sample * sizeof(int32_t)};
  parts_[kLabels] = {reinterpret_cast<const char*>(data.labels.data()),
                     data.is_classification() ? data.labels_per_sample() * sizeof(int32_t) : 0};
  parts_[kTargets] = {reinterpret_cast<const char*>(data.targets.data()), data.target_dim * sizeof(float)};
  size_t slot_bytes = 0;
  for (Part& part : parts_) {
    part.offset_bytes = slot_bytes;
    slot_bytes += align_up(static_cast<size_t>(max_batch) * part.row_bytes);
  }
  slots_ = backend.make_upload_slots(slot_bytes);
}

int BatchLoader::slot_holding(const uint32_t* indices, int rows) const {
  // The current slot first: it is the one a resident batch sits in.
  for (int s : {current_slot_, other_slot()}) {
    if (s == kNoSlot || !filled_[s]) continue;
    if (held_[s].size() == static_cast<size_t>(rows) && std::equal(held_[s].begin(), held_[s].end(), indices)) return s;
  }
  return kNoSlot;
}

void BatchLoader::fill(int slot, const uint32_t* indices, int rows) {
  DDP_REQUIRE(rows >= 0 && rows <= max_batch_,
              "BatchLoader: batch of " + std::to_string(rows) + " rows, at most " + std::to_string(max_batch_));
  filled_[slot] = false;  // until the copies are queued
  held_[slot].clear();    // the fill gives up the slot's previous batch
  char* staging = static_cast<char*>(slots_->begin_fill(slot));
  // The same gather for every part: rows are bytes here.
  for (const Part& part : parts_) {
    if (part.row_bytes == 0) continue;
    char* rows_out = staging + part.offset_bytes;
    for (int r = 0; r < rows; ++r)
      std::memcpy(rows_out + r * part.row_bytes, part.host_rows + indices[r] * part.row_bytes, part.row_bytes);
    slots_->copy(slot, part.offset_bytes, static_cast<size_t>(rows) * part.row_bytes);
  }
  slots_->end_fill(slot);
  held_[slot].assign(indices, indices + rows);
  filled_[slot] = true;
  ++counts_.copies;
}

DeviceBatch BatchLoader::batch_in(int slot, int rows) {
  void* base = slots_->device_slot(slot);
  DeviceBatch b;
  b.features_lowp = static_cast<const lowp16*>(parts_[kFeatures].in(base));
  b.token_ids = static_cast<const int32_t*>(parts_[kTokenIds].in(base));
  b.labels = static_cast<const int32_t*>(parts_[kLabels].in(base));
  b.targets_fp32 = static_cast<const float*>(parts_[kTargets].in(base));
  b.rows = rows;
  b.labels_per_row = labels_per_row_;
  return b;
}

void BatchLoader::prefetch(const uint32_t* indices, int rows) {
  if (slot_holding(indices, rows) != kNoSlot) return;
  // Never the current slot: the compute stream may still be reading it.
  fill(other_slot(), indices, rows);
}

DeviceBatch BatchLoader::load(const uint32_t* indices, int rows) {
  ++counts_.loads;
  int slot = slot_holding(indices, rows);
  if (slot == kNoSlot) {
    slot = other_slot();
    fill(slot, indices, rows);
    ++counts_.loaded_on_demand;
  }
  if (slot != current_slot_) {
    if (current_slot_ != kNoSlot) slots_->release(current_slot_);
    slots_->wait_filled(slot);
    current_slot_ = slot;
  }
  current_batch_ = batch_in(slot, rows);
  return current_batch_;
}

}  // namespace ddp
