// device_query_nocuda.cpp: the CPU-only build's answer (DDP_CUDA=OFF).
#include "kernels/device_query.h"

namespace ddp {

int visible_cuda_devices(std::string* why_none) {
  if (why_none) *why_none = "this build has no CUDA support (configured with DDP_CUDA=OFF or no CUDA toolkit)";
  return 0;
}

}  // namespace ddp
