// cuda_upload_slots.cpp
#include "kernels/cuda/cuda_upload_slots.h"

#include <utility>

#include "kernels/cuda/cuda_check.h"
#include "kernels/error.h"

namespace ddp {

CudaUploadSlots::CudaUploadSlots(cudaStream_t compute_stream, size_t slot_bytes, std::function<bool()> skips_waits)
    : compute_stream_(compute_stream),
      slot_bytes_(slot_bytes),
      skips_waits_(std::move(skips_waits)),
      copy_stream_(make_non_blocking_stream()) {
  for (Slot& s : slots_) {
    s.staging = cuda_host_alloc_unique(slot_bytes_);
    s.device = cuda_malloc_unique(slot_bytes_);
    s.copied = make_ordering_event();
    s.released = make_ordering_event();
  }
}

CudaUploadSlots::~CudaUploadSlots() {
  if (skips_waits_ && skips_waits_()) {
    // Kernels of a replay that may never end may still read the slots: no
    // wait, and no free (cudaFree and cudaFreeHost wait for the device in
    // practice). The events and the copy stream go without waiting.
    for (Slot& s : slots_) {
      static_cast<void>(s.staging.release());
      static_cast<void>(s.device.release());
    }
    return;
  }
  // Copies may still read the staging and write the device memory, and
  // queued kernels may still read the device memory.
  DDP_CUDA_CHECK_NOTHROW(cudaStreamSynchronize(copy_stream_.get()));
  DDP_CUDA_CHECK_NOTHROW(cudaStreamSynchronize(compute_stream_));
}

CudaUploadSlots::Slot& CudaUploadSlots::at(int slot) {
  DDP_REQUIRE(slot >= 0 && slot < kSlotCount, "no such upload slot");
  return slots_[slot];
}

void* CudaUploadSlots::device_slot(int slot) { return at(slot).device.get(); }

void* CudaUploadSlots::begin_fill(int slot) {
  Slot& s = at(slot);
  // (c) The last copy out of this staging was queued a batch ago and has
  // normally finished: this wait costs nothing in steady state.
  if (skipped_wait_ != Wait::HostWaitsForCopy) DDP_CUDA_CHECK(cudaEventSynchronize(s.copied.get()));
  // (b) The copies queued next must not overwrite the slot while kernels
  // queued before its release still read it.
  if (skipped_wait_ != Wait::CopyWaitsForRelease)
    DDP_CUDA_CHECK(cudaStreamWaitEvent(copy_stream_.get(), s.released.get(), 0));
  return s.staging.get();
}

void CudaUploadSlots::copy(int slot, size_t offset_bytes, size_t size_bytes) {
  Slot& s = at(slot);
  DDP_REQUIRE(offset_bytes + size_bytes <= slot_bytes_, "upload past the end of a slot");
  if (size_bytes == 0) return;
  // From pinned memory: a true asynchronous DMA, the host returns at once.
  DDP_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(s.device.get()) + offset_bytes,
                                 static_cast<const char*>(s.staging.get()) + offset_bytes, size_bytes,
                                 cudaMemcpyHostToDevice, copy_stream_.get()));
}

void CudaUploadSlots::end_fill(int slot) { DDP_CUDA_CHECK(cudaEventRecord(at(slot).copied.get(), copy_stream_.get())); }

// (a) An event wait, not a host sync: the host goes on queuing the step.
void CudaUploadSlots::wait_filled(int slot) {
  Slot& s = at(slot);
  if (skipped_wait_ != Wait::ComputeWaitsForCopy)
    DDP_CUDA_CHECK(cudaStreamWaitEvent(compute_stream_, s.copied.get(), 0));
}

void CudaUploadSlots::release(int slot) { DDP_CUDA_CHECK(cudaEventRecord(at(slot).released.get(), compute_stream_)); }

}  // namespace ddp
