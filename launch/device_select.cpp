// device_select.cpp
#include "launch/device_select.h"

#include <algorithm>
#include <thread>

#include "kernels/cpu_backend.h"
#include "kernels/device_query.h"
#include "kernels/error.h"
#if defined(DDP_HAVE_CUDA)
#include "kernels/cuda_backend.h"
#endif

namespace ddp {

DeviceChoice select_device(const std::string& device, int local_rank, int local_ranks, int cpu_threads) {
  DeviceChoice out;
  std::string why_none;
  const int gpus = device == "cpu" ? 0 : visible_cuda_devices(&why_none);
  if (device == "cuda" && gpus == 0) throw Error("--device cuda: no usable GPU (" + why_none + ")");
  if (gpus > 0) {
#if defined(DDP_HAVE_CUDA)
    if (local_rank >= gpus)
      throw Error("local rank " + std::to_string(local_rank) + " needs a GPU but only " + std::to_string(gpus) +
                  " are visible (" + std::to_string(local_ranks) + " ranks on this host)");
    out.backend = std::make_unique<CudaBackend>(local_rank);
    out.notice = "device: " + out.backend->description();
    return out;
#endif
  }
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int threads = cpu_threads > 0 ? cpu_threads : std::max(1, cores / std::max(local_ranks, 1));
  (void)local_rank;  // picks the GPU only
  out.backend = std::make_unique<CpuBackend>(threads);
  out.notice = "device: " + out.backend->description() +
               (device == "auto" ? " (no GPU: " + why_none + ")" : std::string(" (--device cpu)"));
  return out;
}

}  // namespace ddp
