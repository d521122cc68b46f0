// device_select.cpp
#include "launch/cli/device_select.h"

#include <sched.h>

#include <algorithm>
#include <thread>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/device_query.h"
#include "kernels/error.h"
#if defined(DDP_HAVE_CUDA)
#include "kernels/cuda/cuda_backend.h"
#endif

namespace ddp {
namespace {
// Default compute threads per rank. A rank that mpirun bound to some cores
// (Open MPI binds to a core each for 2 ranks or fewer) uses exactly those:
// threads beyond its mask would only share them. An unbound rank takes its
// share of the machine's cores.
int default_threads(int local_ranks) {
  const int all = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  cpu_set_t mask;
  if (sched_getaffinity(0, sizeof mask, &mask) == 0 && CPU_COUNT(&mask) < all) return std::max(1, CPU_COUNT(&mask));
  return std::max(1, all / std::max(local_ranks, 1));
}

// The cores this process may run on: its affinity mask, else the machine's.
int cores_for_this_rank() {
  cpu_set_t mask;
  if (sched_getaffinity(0, sizeof mask, &mask) == 0) return std::max(1, CPU_COUNT(&mask));
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// --threads above this many per core is refused (cores_for_this_rank).
constexpr int kMaxThreadsPerCore = 8;
}  // namespace

std::string resolved_device_kind(const std::string& device) {
#if defined(DDP_HAVE_CUDA)
  if (device != "cpu" && visible_cuda_devices() > 0) return "cuda";
#else
  (void)device;
#endif
  return "cpu";
}

DeviceChoice select_device(const std::string& device, int local_rank, int local_ranks, int cpu_threads,
                           [[maybe_unused]] const std::string& host, Precision precision) {  // host: CUDA only
  DeviceChoice out;
  std::string why_none;
  const int gpus = device == "cpu" ? 0 : visible_cuda_devices(&why_none);
  if (device == "cuda" && gpus == 0) throw Error("--device cuda: no usable GPU (" + why_none + ")");
  if (gpus > 0) {
#if defined(DDP_HAVE_CUDA)
    // Checked by every rank, so the job stops at once instead of ranks
    // silently sharing a GPU (which NCCL refuses later, less clearly).
    if (local_ranks > gpus)
      throw Error("host " + host + " runs " + std::to_string(local_ranks) + " ranks but has " + std::to_string(gpus) +
                  " visible GPU(s): start at most one rank per GPU (e.g. mpirun --map-by ppr:" + std::to_string(gpus) +
                  ":node), or use --device cpu");
    out.backend = std::make_unique<CudaBackend>(local_rank, precision);
    out.notice = "device: " + out.backend->description();
    return out;
#endif
  }
  const int threads = cpu_threads > 0 ? cpu_threads : default_threads(local_ranks);
  (void)local_rank;  // picks the GPU only
  // Workers beyond a few per core only wait for one (each spins before it
  // sleeps): thousands of them make every step crawl, which looks like a hang.
  const int cores = cores_for_this_rank();
  if (cpu_threads > kMaxThreadsPerCore * cores)
    throw Error("--threads " + std::to_string(cpu_threads) + ": this rank can run on " + std::to_string(cores) +
                " core(s), and more than " + std::to_string(kMaxThreadsPerCore) +
                " threads a core only slow it down (0 takes its cores)");
  try {
    out.backend = std::make_unique<CpuBackend>(threads, precision);
  } catch (const Error& e) {
    throw Error("--threads " + std::to_string(threads) + (cpu_threads > 0 ? "" : " (the default)") + ": " + e.what());
  }
  out.notice = "device: " + out.backend->description() +
               (device == "auto" ? " (no GPU: " + why_none + ")" : std::string(" (--device cpu)"));
  return out;
}

}  // namespace ddp
