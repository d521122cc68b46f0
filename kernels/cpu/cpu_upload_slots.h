// cpu_upload_slots.h: UploadSlots on the CPU backend. "Device" memory is
// host memory and the backend runs synchronously on the caller's thread, so
// every wait is already met, and the staging a fill writes is the slot
// itself: copy() has nothing to move (a second pass over every batch saved).
#pragma once

#include <array>
#include <cstddef>
#include <memory>

#include "kernels/upload_slots.h"

namespace ddp {

class CpuUploadSlots final : public UploadSlots {
 public:
  explicit CpuUploadSlots(size_t slot_bytes);

  size_t slot_bytes() const override { return slot_bytes_; }
  void* device_slot(int slot) override;
  void* begin_fill(int slot) override;
  void copy(int slot, size_t offset_bytes, size_t size_bytes) override;
  void end_fill(int) override {}
  void wait_filled(int) override {}
  void release(int) override {}

 private:
  struct FreeDeleter {
    void operator()(void* p) const noexcept;
  };
  using HostMemory = std::unique_ptr<void, FreeDeleter>;

  size_t slot_bytes_;
  std::array<HostMemory, kSlotCount> slots_;  // staging and "device" memory at once
};

}  // namespace ddp
