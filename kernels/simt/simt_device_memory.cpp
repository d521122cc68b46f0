// simt_device_memory.cpp: the executor's cudaMalloc arena (see the header).
#include "kernels/simt/simt_device_memory.h"

#include <sys/mman.h>

#include <string>

#include "kernels/error.h"

namespace ddp::simt {
namespace {
constexpr size_t kAlignment = 256;     // cudaMalloc's guarantee
constexpr size_t kMinGapBytes = 4096;  // never allocated: an access there is out of bounds
constexpr size_t kPageBytes = 4096;

uintptr_t round_up(uintptr_t v, size_t to) { return (v + to - 1) / to * to; }
}  // namespace

DeviceMemory& DeviceMemory::instance() {
  static DeviceMemory memory;
  return memory;
}

// Address space only: MAP_NORESERVE pages cost nothing until touched, and
// the gaps stay readable so that a reported access does not also crash.
DeviceMemory::DeviceMemory() {
  for (size_t gib : {256, 64, 16, 4}) {
    const size_t bytes = gib << 30;
    void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) continue;
    base_ = reinterpret_cast<uintptr_t>(m);
    reserved_ = bytes;
    next_ = round_up(base_ + kMinGapBytes, kAlignment);
    return;
  }
  throw Error("SIMT executor: cannot reserve address space for device memory");
}

void* DeviceMemory::allocate(size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  const uintptr_t start = next_;
  // The gap after it is as large as the allocation (at least a page), so an
  // index that overshoots by up to its own size lands in no allocation.
  const size_t gap = round_up(bytes > kMinGapBytes ? bytes : kMinGapBytes, kPageBytes);
  const uintptr_t end = round_up(start + (bytes ? bytes : 1) + gap, kAlignment);
  if (end > base_ + reserved_) return nullptr;
  next_ = end;
  allocations_[start] = Allocation{bytes, true};
  return reinterpret_cast<void*>(start);
}

bool DeviceMemory::release(void* p) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = allocations_.find(reinterpret_cast<uintptr_t>(p));
  if (it == allocations_.end() || !it->second.live) return false;
  it->second.live = false;
  // Give the memory back but keep the addresses: an access after free is
  // reported, never silently served by a newer allocation.
  const uintptr_t first_page = round_up(it->first, kPageBytes);
  const uintptr_t end_page = (it->first + it->second.bytes) / kPageBytes * kPageBytes;
  if (end_page > first_page) madvise(reinterpret_cast<void*>(first_page), end_page - first_page, MADV_DONTNEED);
  return true;
}

std::string DeviceMemory::check_range(const void* p, size_t bytes) const {
  const auto a = reinterpret_cast<uintptr_t>(p);
  auto it = allocations_.upper_bound(a);
  if (it != allocations_.begin()) {
    --it;
    if (it->second.live && a + bytes <= it->first + it->second.bytes) return {};
  }
  const std::string what = std::to_string(bytes) + " bytes at ";
  if (it == allocations_.end()) return what + "an address where nothing was allocated";
  if (a < it->first) return what + "an address before every allocation";
  const Allocation& alloc = it->second;
  return what + "offset " + std::to_string(a - it->first) + " of a " + (alloc.live ? "" : "freed ") +
         std::to_string(alloc.bytes) + "-byte allocation";
}

}  // namespace ddp::simt
