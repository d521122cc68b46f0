// batch_loader.cpp
#include "trainer/batch_loader.h"

#include <algorithm>
#include <cstring>

#include "kernels/error.h"
#include "kernels/half_convert.h"

namespace ddp {
namespace {
// Each region of a slot starts on a 256-byte boundary (cudaMalloc's
// alignment), so every pointer handed to a kernel is as aligned as a Buffer's.
size_t align_up(size_t size_bytes) { return (size_bytes + 255) / 256 * 256; }
}  // namespace

BatchLoader::BatchLoader(Backend& backend, const Dataset& data, int max_batch)
    : data_(data), max_batch_(max_batch), host_features_fp16_(data.x.size()) {
  DDP_REQUIRE(max_batch > 0, "BatchLoader: max_batch must be positive");
  float_to_half_array(data.x.data(), host_features_fp16_.data(), data.x.size());
  const size_t rows = static_cast<size_t>(max_batch);
  labels_offset_bytes_ = targets_offset_bytes_ = align_up(rows * data.features * sizeof(half16));
  const size_t tail_bytes =
      data.is_classification() ? rows * sizeof(int32_t) : rows * data.target_dim * sizeof(float);
  slots_ = backend.make_upload_slots(labels_offset_bytes_ + align_up(tail_bytes));
}

int BatchLoader::slot_holding(const uint32_t* indices, int rows) const {
  // The current slot first: it is the one a resident batch sits in.
  for (int s : {current_slot_, other_slot()}) {
    if (s == kNoSlot || !filled_[s]) continue;
    if (held_[s].size() == static_cast<size_t>(rows) && std::equal(held_[s].begin(), held_[s].end(), indices))
      return s;
  }
  return kNoSlot;
}

void BatchLoader::fill(int slot, const uint32_t* indices, int rows) {
  DDP_REQUIRE(rows >= 0 && rows <= max_batch_, "BatchLoader: batch of " + std::to_string(rows) +
                                                   " rows, at most " + std::to_string(max_batch_));
  filled_[slot] = false;  // until the copies are queued
  held_[slot].clear();    // the fill gives up the slot's previous batch
  char* staging = static_cast<char*>(slots_->begin_fill(slot));
  const size_t d = data_.features;
  half16* features = reinterpret_cast<half16*>(staging);
  for (int r = 0; r < rows; ++r)
    std::memcpy(&features[r * d], &host_features_fp16_[indices[r] * d], d * sizeof(half16));
  slots_->copy(slot, 0, static_cast<size_t>(rows) * d * sizeof(half16));
  if (data_.is_classification()) {
    int32_t* labels = reinterpret_cast<int32_t*>(staging + labels_offset_bytes_);
    for (int r = 0; r < rows; ++r) labels[r] = data_.labels[indices[r]];
    slots_->copy(slot, labels_offset_bytes_, static_cast<size_t>(rows) * sizeof(int32_t));
  } else {
    const size_t k = data_.target_dim;
    float* targets = reinterpret_cast<float*>(staging + targets_offset_bytes_);
    for (int r = 0; r < rows; ++r) std::memcpy(&targets[r * k], &data_.targets[indices[r] * k], k * sizeof(float));
    slots_->copy(slot, targets_offset_bytes_, static_cast<size_t>(rows) * k * sizeof(float));
  }
  slots_->end_fill(slot);
  held_[slot].assign(indices, indices + rows);
  filled_[slot] = true;
  ++counts_.copies;
}

DeviceBatch BatchLoader::batch_in(int slot, int rows) {
  char* base = static_cast<char*>(slots_->device_slot(slot));
  DeviceBatch b;
  b.features_fp16 = reinterpret_cast<const half16*>(base);
  if (data_.is_classification()) b.labels = reinterpret_cast<const int32_t*>(base + labels_offset_bytes_);
  else b.targets_fp32 = reinterpret_cast<const float*>(base + targets_offset_bytes_);
  b.rows = rows;
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
