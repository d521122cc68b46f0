// cuda_device_query.cpp: the CUDA build's answer to "is there a GPU?".
// Never throws: without a driver cudaGetDeviceCount returns an error
// (cudaErrorInsufficientDriver, cudaErrorNoDevice, ...) rather than zero
// devices, and every such error just means "CPU only".
#include <cuda_runtime.h>

#include "kernels/device_query.h"

namespace ddp {

int visible_cuda_devices(std::string* why_none) {
  try {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
      // Clear the error so a later, unrelated cudaGetLastError() does not
      // report this one.
      (void)cudaGetLastError();
      if (why_none)
        *why_none = std::string("cudaGetDeviceCount: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
      return 0;
    }
    if (count <= 0) {
      if (why_none) *why_none = "no CUDA device visible";
      return 0;
    }
    if (why_none) why_none->clear();
    return count;
  } catch (...) {  // only std::string allocation can throw here
    return 0;
  }
}

}  // namespace ddp
