// simt_device_memory.h: "device" memory of the SIMT executor. cudaMalloc
// hands out exact-size ranges of one large reserved mapping, each followed
// by a gap that no allocation ever uses, and freed ranges are never handed
// out again; so every kernel access can be checked against the allocation
// it falls in (out of bounds, after free, nowhere), the way
// compute-sanitizer's memcheck reports a GPU's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace ddp::simt {

class DeviceMemory {
 public:
  static DeviceMemory& instance();

  // nullptr when the reservation is used up (cudaErrorMemoryAllocation).
  void* allocate(size_t bytes);
  // false: p is not the start of a live allocation.
  bool release(void* p);

  bool in_arena(const void* p) const {
    const auto a = reinterpret_cast<uintptr_t>(p);
    return a >= base_ && a < base_ + reserved_;
  }
  // Empty when [p, p + bytes) lies inside one live allocation; otherwise a
  // description ("4 bytes at offset 4096 of a 4096-byte allocation", "...
  // of a freed 64-byte allocation", "... outside every allocation").
  std::string check_range(const void* p, size_t bytes) const;

 private:
  DeviceMemory();
  struct Allocation {
    size_t bytes;
    bool live;
  };
  uintptr_t base_ = 0;
  size_t reserved_ = 0;
  uintptr_t next_ = 0;
  std::map<uintptr_t, Allocation> allocations_;  // by start address
  mutable std::mutex mutex_;
};

}  // namespace ddp::simt
