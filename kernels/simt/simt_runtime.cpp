// simt_runtime.cpp: the part of the CUDA runtime API that our kernels,
// their launchers and the executor's tests call, implemented on the host
// for the SIMT executor's build (which links this instead of libcudart).
//
// Memory is the executor's exact-size arena (simt_device_memory.h); copies
// check that their device side lies inside one allocation, as the real
// runtime's do not but compute-sanitizer would. Streams run in order:
// every operation completes before its call returns, so events are marks
// that are always complete and synchronisation has nothing to wait for.
// Several devices are emulated (DDP_SIMT_DEVICES, default 2) so that state
// kept per device (a kernel's shared-memory opt-in) is exercised. One host
// thread at a time: the current device is the process's, not each
// thread's, and nothing here is locked.
#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "kernels/simt/simt_device_memory.h"
#include "kernels/simt/simt_runtime_state.h"

namespace ddp::simt {
namespace {

struct RuntimeState {
  int device = 0;
  std::set<cudaStream_t> streams;
  std::set<cudaEvent_t> events;
  std::map<std::pair<int, const void*>, int> dynamic_shared_opt_in;  // (device, kernel) -> bytes
};

RuntimeState& state() {
  static RuntimeState s;
  return s;
}

thread_local cudaError_t g_last_error = cudaSuccess;

cudaError_t note(cudaError_t e) {
  if (e != cudaSuccess) g_last_error = e;
  return e;
}

int device_count() {
  const char* text = std::getenv("DDP_SIMT_DEVICES");
  const int n = text ? std::atoi(text) : 2;
  return n >= 1 ? n : 1;
}

bool device_range_ok(const void* p, size_t bytes) {
  const DeviceMemory& m = DeviceMemory::instance();
  return bytes == 0 || (m.in_arena(p) && m.check_range(p, bytes).empty());
}

bool copy_ok(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  const bool dst_device = DeviceMemory::instance().in_arena(dst);
  const bool src_device = DeviceMemory::instance().in_arena(src);
  switch (kind) {
    case cudaMemcpyHostToDevice:
      return device_range_ok(dst, count) && !src_device;
    case cudaMemcpyDeviceToHost:
      return device_range_ok(src, count) && !dst_device;
    case cudaMemcpyDeviceToDevice:
      return device_range_ok(dst, count) && device_range_ok(src, count);
    case cudaMemcpyHostToHost:
      return !dst_device && !src_device;
    case cudaMemcpyDefault:
      return (!dst_device || device_range_ok(dst, count)) && (!src_device || device_range_ok(src, count));
  }
  return false;
}

bool stream_ok(cudaStream_t s) { return stream_exists(s); }

}  // namespace

int current_device() { return state().device; }

size_t dynamic_shared_limit(const void* kernel) {
  const auto it = state().dynamic_shared_opt_in.find({state().device, kernel});
  return static_cast<size_t>(it == state().dynamic_shared_opt_in.end() ? kSharedBytesDefaultLimit : it->second);
}

bool stream_exists(cudaStream_t stream) {
  return stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread ||
         state().streams.count(stream) > 0;
}

}  // namespace ddp::simt

using ddp::simt::note;
using ddp::simt::state;

extern "C" {

cudaError_t cudaGetLastError() {
  const cudaError_t e = ddp::simt::g_last_error;
  ddp::simt::g_last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError() { return ddp::simt::g_last_error; }

const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle:
      return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotSupported:
      return "cudaErrorNotSupported";
    default:
      return "cudaError (SIMT executor)";
  }
}

const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidValue:
      return "invalid argument (SIMT executor: a copy or set outside a device allocation, or a bad attribute)";
    case cudaErrorMemoryAllocation:
      return "out of memory (SIMT executor's arena)";
    case cudaErrorInvalidDevice:
      return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle:
      return "invalid resource handle";
    case cudaErrorNotSupported:
      return "operation not supported by the SIMT executor";
    default:
      return "unknown error (SIMT executor)";
  }
}

cudaError_t cudaGetDeviceCount(int* count) {
  *count = ddp::simt::device_count();
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  *device = state().device;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= ddp::simt::device_count()) return note(cudaErrorInvalidDevice);
  state().device = device;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (device < 0 || device >= ddp::simt::device_count()) return note(cudaErrorInvalidDevice);
  switch (attr) {
    case cudaDevAttrComputeCapabilityMajor:
      *value = 9;
      return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor:
      *value = 0;
      return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlock:
      *value = ddp::simt::kSharedBytesDefaultLimit;
      return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin:
      *value = ddp::simt::kSharedBytesOptInLimit;
      return cudaSuccess;
    case cudaDevAttrMultiProcessorCount:
      *value = 132;
      return cudaSuccess;
    case cudaDevAttrWarpSize:
      *value = 32;
      return cudaSuccess;
    case cudaDevAttrMaxThreadsPerBlock:
      *value = 1024;
      return cudaSuccess;
    default:
      return note(cudaErrorNotSupported);
  }
}

cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) return note(cudaErrorNotSupported);
  if (value < 0 || value > ddp::simt::kSharedBytesOptInLimit) return note(cudaErrorInvalidValue);
  state().dynamic_shared_opt_in[{state().device, func}] = value;
  return cudaSuccess;
}

// The executor runs any kernel: the image check always passes.
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attr, const void* func) {
  std::memset(attr, 0, sizeof(*attr));
  attr->maxThreadsPerBlock = 1024;
  attr->maxDynamicSharedSizeBytes = static_cast<int>(ddp::simt::dynamic_shared_limit(func));
  attr->ptxVersion = 90;
  attr->binaryVersion = 90;
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** p, size_t bytes) {
  *p = ddp::simt::DeviceMemory::instance().allocate(bytes);
  return *p ? cudaSuccess : note(cudaErrorMemoryAllocation);
}

cudaError_t cudaFree(void* p) {
  if (!p) return cudaSuccess;
  return ddp::simt::DeviceMemory::instance().release(p) ? cudaSuccess : note(cudaErrorInvalidValue);
}

cudaError_t cudaMallocHost(void** p, size_t bytes) {
  *p = std::malloc(bytes ? bytes : 1);
  return *p ? cudaSuccess : note(cudaErrorMemoryAllocation);
}

cudaError_t cudaFreeHost(void* p) {
  std::free(p);
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  if (!ddp::simt::copy_ok(dst, src, count, kind)) return note(cudaErrorInvalidValue);
  if (count) std::memmove(dst, src, count);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind, cudaStream_t stream) {
  if (!ddp::simt::stream_ok(stream)) return note(cudaErrorInvalidResourceHandle);
  return cudaMemcpy(dst, src, count, kind);
}

cudaError_t cudaMemset(void* p, int value, size_t count) {
  if (!ddp::simt::device_range_ok(p, count)) return note(cudaErrorInvalidValue);
  if (count) std::memset(p, value, count);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* p, int value, size_t count, cudaStream_t stream) {
  if (!ddp::simt::stream_ok(stream)) return note(cudaErrorInvalidResourceHandle);
  return cudaMemset(p, value, count);
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  *stream = reinterpret_cast<cudaStream_t>(new char);
  state().streams.insert(*stream);
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int) { return cudaStreamCreate(stream); }

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (!state().streams.erase(stream)) return note(cudaErrorInvalidResourceHandle);
  delete reinterpret_cast<char*>(stream);
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  return ddp::simt::stream_ok(stream) ? cudaSuccess : note(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  *event = reinterpret_cast<cudaEvent_t>(new char);
  state().events.insert(*event);
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int) { return cudaEventCreate(event); }

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (!state().events.erase(event)) return note(cudaErrorInvalidResourceHandle);
  delete reinterpret_cast<char*>(event);
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (!state().events.count(event) || !ddp::simt::stream_ok(stream)) return note(cudaErrorInvalidResourceHandle);
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  return state().events.count(event) ? cudaSuccess : note(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaEventQuery(cudaEvent_t event) { return cudaEventSynchronize(event); }

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int) {
  if (!state().events.count(event) || !ddp::simt::stream_ok(stream)) return note(cudaErrorInvalidResourceHandle);
  return cudaSuccess;
}

}  // extern "C"
