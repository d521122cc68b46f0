// device_select.h: --device auto|cuda|cpu to a Backend, said in one line.
#pragma once

#include <memory>
#include <string>

#include "kernels/backend.h"

namespace ddp {

struct DeviceChoice {
  std::unique_ptr<Backend> backend;
  std::string notice;  // one line for the log: what was chosen and why
};

// What --device auto|cuda|cpu resolves to on this node: "cuda" where this
// build has CUDA and a GPU is visible (and --device is not cpu), else "cpu"
// (--device cuda without a GPU is refused by select_device).
std::string resolved_device_kind(const std::string& device);

// local_rank picks the GPU (one rank per GPU; more local ranks than GPUs on
// `host` is an error); cpu_threads <= 0 means cores / local_ranks. The
// backend computes in `precision` (bf16 on a GPU before Ampere is an
// error: CudaBackend refuses it).
DeviceChoice select_device(const std::string& device, int local_rank, int local_ranks, int cpu_threads,
                           const std::string& host, Precision precision = Precision::Fp16);

}  // namespace ddp
