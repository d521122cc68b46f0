// simt_access_check.cpp: every load and store of kernel code, checked.
//
// How the accesses reach us: the executor build compiles the kernel
// translation units with GCC's ThreadSanitizer instrumentation
// (-fsanitize=thread) but links none of ThreadSanitizer's runtime; the
// __tsan_readN/__tsan_writeN calls it puts before every memory access land
// in the hooks at the bottom of this file. (AddressSanitizer cannot be
// combined with that instrumentation, so bounds are checked here too,
// against the executor's exact-size device allocations.) Static
// __shared__ arrays are indexed with -fsanitize=bounds, whose handler is
// also here.
//
// The rules, for an access by the running CUDA thread:
// - its own stack: nothing to check;
// - device memory (simt_device_memory.h): inside one live allocation;
// - the dynamic shared memory: inside the launch's shared_bytes;
// - anything else a kernel touches that is not its stack is the block's
//   shared memory (static __shared__ arrays; kernel arguments are only
//   read). There, as compute-sanitizer's racecheck: a read of a byte another
//   thread wrote, or a write of a byte another thread read or wrote, since
//   the last __syncthreads() is a race, unless both threads are lanes of one
//   warp that have passed a __syncwarp() naming both since. Not seen: a
//   static __shared__ array indexed past its end through a pointer (only a
//   direct index is bounds-checked), memcpy/memset inside a kernel (left to
//   ThreadSanitizer's interceptors, which are not linked), and an inline
//   function that the linker took from an uninstrumented copy.
#include "kernels/simt/simt_access_check.h"

#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/simt/simt_device_memory.h"
#include "kernels/simt/simt_executor.h"

namespace ddp::simt {
namespace {

struct Access {
  int32_t thread = -1;      // linear index in the block; -1: none
  uint32_t warp_syncs = 0;  // the warp's completed __syncwarp()s at the access
};

// What happened to one byte since the last barrier: its last write, and
// every thread that read it since (each with its latest read), as long as
// they are lanes of one warp; readers from two warps make any later write
// by anyone a race, so they need no list.
struct ByteHistory {
  Access writer;
  std::vector<Access> readers;
  bool readers_span_warps = false;
};

thread_local std::unordered_map<uintptr_t, ByteHistory> g_history;

// Ordered: the same thread, or lanes of one warp with a __syncwarp() since
// that named both.
bool ordered(const Access& earlier, const RunningThread& now) {
  if (earlier.thread == now.linear) return true;
  return warp_of(earlier.thread) == now.warp &&
         warp_synced_since(now.warp, earlier.warp_syncs, earlier.thread, now.linear);
}

std::string pc_text(const void* pc) {
  Dl_info info{};
  if (!pc || !dladdr(pc, &info) || !info.dli_fname) return "";
  std::ostringstream out;
  out << " (access at " << info.dli_fname << "+0x" << std::hex
      << (reinterpret_cast<uintptr_t>(pc) - reinterpret_cast<uintptr_t>(info.dli_fbase)) << ")";
  return out.str();
}

void report_race(const RunningThread& t, bool write, uintptr_t address, int other_thread, bool other_wrote,
                 const void* pc) {
  std::ostringstream addr;
  addr << "0x" << std::hex << address;
  const std::string other = other_thread >= 0 ? thread_name(other_thread) : "threads of another warp";
  fail("shared-memory race at " + addr.str() + ": " + thread_name(t.linear) + (write ? " writes" : " reads") +
       " a byte that " + other + (other_wrote ? " wrote" : " read") + " since " + last_barrier_name() +
       ", with no barrier between (a missing __syncthreads()?)" + pc_text(pc));
}

void note_read(ByteHistory& h, const RunningThread& t, const Access& now) {
  if (h.readers_span_warps) return;
  for (Access& r : h.readers)
    if (r.thread == now.thread) {
      r = now;  // its latest read is the one a later write must follow
      return;
    }
  if (!h.readers.empty() && warp_of(h.readers.front().thread) != t.warp) {
    h.readers_span_warps = true;
    h.readers.clear();
    return;
  }
  h.readers.push_back(now);
}

// A reader the write by t is not ordered after: its thread, -2 for one of
// another warp, -1 for none.
int unordered_reader(const ByteHistory& h, const RunningThread& t) {
  if (h.readers_span_warps) return -2;
  for (const Access& r : h.readers)
    if (!ordered(r, t)) return r.thread;
  return -1;
}

void check_shared_byte(const RunningThread& t, uintptr_t a, bool write, const void* pc) {
  ByteHistory& h = g_history[a];
  const Access now{t.linear, warp_sync_count(t.warp)};
  if (h.writer.thread >= 0 && !ordered(h.writer, t)) return report_race(t, write, a, h.writer.thread, true, pc);
  if (!write) return note_read(h, t, now);
  const int reader = unordered_reader(h, t);
  if (reader != -1) return report_race(t, write, a, reader >= 0 ? reader : -1, false, pc);
  h = ByteHistory{};
  h.writer = now;
}

}  // namespace

void start_access_epoch() { g_history.clear(); }

void check_access(const void* address, size_t bytes, bool write, const void* pc) {
  const RunningThread* t = running_thread();
  if (!t) return;
  const auto a = reinterpret_cast<uintptr_t>(address);
  if (a >= t->stack_lo && a < t->stack_hi) return;
  const DeviceMemory& memory = DeviceMemory::instance();
  if (memory.in_arena(address)) {
    const std::string problem = memory.check_range(address, bytes);
    if (!problem.empty())
      fail(std::string("out-of-bounds global ") + (write ? "write" : "read") + " by " + thread_name(t->linear) + ": " +
           problem + pc_text(pc));
    return;
  }
  const SharedRange dynamic = dynamic_shared_range();
  if (dynamic.guard_bytes && a + bytes > dynamic.base - dynamic.guard_bytes &&
      a < dynamic.base + dynamic.bytes + dynamic.guard_bytes) {
    if (a < dynamic.base || a + bytes > dynamic.base + dynamic.bytes) {
      fail(std::string("out-of-bounds dynamic shared memory ") + (write ? "write" : "read") + " by " +
           thread_name(t->linear) + ": " + std::to_string(bytes) + " bytes at offset " +
           std::to_string(static_cast<long long>(a) - static_cast<long long>(dynamic.base)) + " of the launch's " +
           std::to_string(dynamic.bytes) + " bytes" + pc_text(pc));
      return;
    }
  }
  for (size_t i = 0; i < bytes; ++i) check_shared_byte(*t, a + i, write, pc);
}

}  // namespace ddp::simt

// ---- the instrumentation's entry points -----------------------------------
// Names and signatures are GCC's ThreadSanitizer ABI (tsan_interface.h).
#define DDP_SIMT_ACCESS_HOOKS(n)                                                                                 \
  extern "C" void __tsan_read##n(void* p) { ddp::simt::check_access(p, n, false, __builtin_return_address(0)); } \
  extern "C" void __tsan_write##n(void* p) { ddp::simt::check_access(p, n, true, __builtin_return_address(0)); } \
  extern "C" void __tsan_unaligned_read##n(void* p) {                                                            \
    ddp::simt::check_access(p, n, false, __builtin_return_address(0));                                           \
  }                                                                                                              \
  extern "C" void __tsan_unaligned_write##n(void* p) {                                                           \
    ddp::simt::check_access(p, n, true, __builtin_return_address(0));                                            \
  }

DDP_SIMT_ACCESS_HOOKS(1)
DDP_SIMT_ACCESS_HOOKS(2)
DDP_SIMT_ACCESS_HOOKS(4)
DDP_SIMT_ACCESS_HOOKS(8)
DDP_SIMT_ACCESS_HOOKS(16)

extern "C" void __tsan_read_range(void* p, unsigned long n) {
  ddp::simt::check_access(p, n, false, __builtin_return_address(0));
}
extern "C" void __tsan_write_range(void* p, unsigned long n) {
  ddp::simt::check_access(p, n, true, __builtin_return_address(0));
}
extern "C" void __tsan_init() {}
extern "C" void __tsan_func_entry(void*) {}
extern "C" void __tsan_func_exit() {}
extern "C" void __tsan_vptr_update(void**, void*) {}
extern "C" void __tsan_vptr_read(void**) {}

// Atomics are not races: the instrumentation routes them here (the host
// code of a kernel file uses them, e.g. a function-local static's guard);
// they run as what they are, sequentially consistent.
#define DDP_SIMT_ATOMIC_HOOKS(bits, type)                                                                            \
  extern "C" type __tsan_atomic##bits##_load(const volatile type* a, int) {                                          \
    return __atomic_load_n(a, __ATOMIC_SEQ_CST);                                                                     \
  }                                                                                                                  \
  extern "C" void __tsan_atomic##bits##_store(volatile type* a, type v, int) {                                       \
    __atomic_store_n(a, v, __ATOMIC_SEQ_CST);                                                                        \
  }                                                                                                                  \
  extern "C" type __tsan_atomic##bits##_exchange(volatile type* a, type v, int) {                                    \
    return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST);                                                              \
  }                                                                                                                  \
  extern "C" type __tsan_atomic##bits##_fetch_add(volatile type* a, type v, int) {                                   \
    return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST);                                                               \
  }                                                                                                                  \
  extern "C" type __tsan_atomic##bits##_fetch_sub(volatile type* a, type v, int) {                                   \
    return __atomic_fetch_sub(a, v, __ATOMIC_SEQ_CST);                                                               \
  }                                                                                                                  \
  extern "C" type __tsan_atomic##bits##_fetch_and(volatile type* a, type v, int) {                                   \
    return __atomic_fetch_and(a, v, __ATOMIC_SEQ_CST);                                                               \
  }                                                                                                                  \
  extern "C" type __tsan_atomic##bits##_fetch_or(volatile type* a, type v, int) {                                    \
    return __atomic_fetch_or(a, v, __ATOMIC_SEQ_CST);                                                                \
  }                                                                                                                  \
  extern "C" type __tsan_atomic##bits##_fetch_xor(volatile type* a, type v, int) {                                   \
    return __atomic_fetch_xor(a, v, __ATOMIC_SEQ_CST);                                                               \
  }                                                                                                                  \
  extern "C" int __tsan_atomic##bits##_compare_exchange_strong(volatile type* a, type* expected, type v, int, int) { \
    return __atomic_compare_exchange_n(a, expected, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                   \
  }                                                                                                                  \
  extern "C" int __tsan_atomic##bits##_compare_exchange_weak(volatile type* a, type* expected, type v, int, int) {   \
    return __atomic_compare_exchange_n(a, expected, v, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                    \
  }                                                                                                                  \
  extern "C" type __tsan_atomic##bits##_compare_exchange_val(volatile type* a, type expected, type v, int, int) {    \
    __atomic_compare_exchange_n(a, &expected, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                         \
    return expected;                                                                                                 \
  }

DDP_SIMT_ATOMIC_HOOKS(8, unsigned char)
DDP_SIMT_ATOMIC_HOOKS(16, unsigned short)
DDP_SIMT_ATOMIC_HOOKS(32, unsigned int)
DDP_SIMT_ATOMIC_HOOKS(64, unsigned long long)

extern "C" void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
extern "C" void __tsan_atomic_signal_fence(int) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }

// -fsanitize=bounds: an index past a static array (a __shared__ buffer one
// element short). The layout is UBSan's (ubsan_handlers.h).
namespace {
struct UbsanSourceLocation {
  const char* file;
  uint32_t line;
  uint32_t column;
};
struct UbsanTypeDescriptor {
  uint16_t kind;
  uint16_t info;
  char name[1];
};
struct UbsanOutOfBoundsData {
  UbsanSourceLocation location;
  const UbsanTypeDescriptor* array_type;
  const UbsanTypeDescriptor* index_type;
};
}  // namespace

extern "C" void __ubsan_handle_out_of_bounds(void* data_in, void* index) {
  const auto* data = static_cast<const UbsanOutOfBoundsData*>(data_in);
  const std::string message = std::string(data->location.file) + ":" + std::to_string(data->location.line) +
                              ": index " + std::to_string(reinterpret_cast<intptr_t>(index)) +
                              " out of bounds for type " + data->array_type->name;
  if (ddp::simt::running_thread()) {
    ddp::simt::fail(ddp::simt::thread_name(ddp::simt::running_thread()->linear) + ": " + message);
    return;
  }
  std::fprintf(stderr, "%s\n", message.c_str());
  std::abort();
}

extern "C" void __ubsan_handle_out_of_bounds_abort(void* data, void* index) {
  __ubsan_handle_out_of_bounds(data, index);
  std::abort();
}
