// cpu_upload_slots.cpp
#include "kernels/cpu/cpu_upload_slots.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "kernels/error.h"

namespace ddp {
namespace {

void* allocate_aligned(size_t size_bytes) {
  // 64-byte alignment, as CpuBackend::allocate_bytes: the slot is read by BLAS.
  void* p = std::aligned_alloc(64, std::max<size_t>(64, (size_bytes + 63) / 64 * 64));
  if (!p) throw Error("CpuUploadSlots: out of host memory allocating " + std::to_string(size_bytes) + " bytes");
  return p;
}

void check_slot(int slot) { DDP_REQUIRE(slot >= 0 && slot < UploadSlots::kSlotCount, "no such upload slot"); }

}  // namespace

void CpuUploadSlots::FreeDeleter::operator()(void* p) const noexcept { std::free(p); }

CpuUploadSlots::CpuUploadSlots(size_t slot_bytes) : slot_bytes_(slot_bytes) {
  for (int s = 0; s < kSlotCount; ++s) slots_[s] = HostMemory(allocate_aligned(slot_bytes));
}

void* CpuUploadSlots::device_slot(int slot) {
  check_slot(slot);
  return slots_[slot].get();
}

// Nothing reads the slot while it is filled: the backend is synchronous and
// a fill gives up the slot's previous batch (upload_slots.h).
void* CpuUploadSlots::begin_fill(int slot) {
  check_slot(slot);
  return slots_[slot].get();
}

void CpuUploadSlots::copy(int slot, size_t offset_bytes, size_t size_bytes) {
  check_slot(slot);
  DDP_REQUIRE(offset_bytes + size_bytes <= slot_bytes_, "upload past the end of a slot");
  // The fill wrote the slot itself.
}

}  // namespace ddp
