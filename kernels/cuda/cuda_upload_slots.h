// cuda_upload_slots.h: UploadSlots on one GPU. Each slot is pinned host
// staging (cudaHostAlloc) and device memory (cudaMalloc), allocated once;
// copies run on a non-blocking `copy_stream` of their own, so they overlap
// the compute stream's kernels. Per slot two events:
//   copied   - recorded on copy_stream by end_fill; the compute stream waits
//              on it (wait_filled), the host waits on it before rewriting
//              the staging (begin_fill);
//   released - recorded on compute_stream by release; copy_stream waits on
//              it before copying into the slot again (begin_fill).
// Waiting on an event never recorded returns at once, so a fresh slot needs
// no special case.
#pragma once

#include <array>
#include <cstddef>
#include <functional>

#include <cuda_runtime.h>

#include "kernels/cuda/cuda_raii.h"
#include "kernels/upload_slots.h"

namespace ddp {

class CudaUploadSlots final : public UploadSlots {
 public:
  // compute_stream: the stream that reads the slots (CudaBackend's); must
  // outlive this object. Allocates on the current device. skips_waits: asked
  // by the destructor (CudaBackend::skips_device_waits; empty: never skips).
  CudaUploadSlots(cudaStream_t compute_stream, size_t slot_bytes, std::function<bool()> skips_waits = {});
  // Waits for both streams' work on the slots before freeing them, unless
  // skips_waits() says the device work may never end: then the slots'
  // memory is left to the end of the process instead.
  ~CudaUploadSlots() override;
  CudaUploadSlots(const CudaUploadSlots&) = delete;
  CudaUploadSlots& operator=(const CudaUploadSlots&) = delete;

  size_t slot_bytes() const override { return slot_bytes_; }
  void* device_slot(int slot) override;
  void* begin_fill(int slot) override;
  void copy(int slot, size_t offset_bytes, size_t size_bytes) override;
  void end_fill(int slot) override;
  void wait_filled(int slot) override;
  void release(int slot) override;

  cudaStream_t copy_stream() const { return copy_stream_.get(); }

  // For tests only: leave out one of the waits (a), (b) or (c) of
  // upload_slots.h, so a test can show that it catches the missing wait.
  enum class Wait { None, ComputeWaitsForCopy, CopyWaitsForRelease, HostWaitsForCopy };
  void skip_wait_for_testing(Wait wait) { skipped_wait_ = wait; }

 private:
  struct Slot {
    UniquePinnedHostMemory staging;
    UniqueDeviceMemory device;
    UniqueCudaEvent copied;
    UniqueCudaEvent released;
  };
  Slot& at(int slot);

  cudaStream_t compute_stream_;
  size_t slot_bytes_;
  std::function<bool()> skips_waits_;
  // Declared first, destroyed last: the slots' memory goes before the stream.
  UniqueCudaStream copy_stream_;
  std::array<Slot, kSlotCount> slots_;
  Wait skipped_wait_ = Wait::None;
};

}  // namespace ddp
