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

// local_rank picks the GPU (one rank per GPU; more local ranks than GPUs on
// `host` is an error); cpu_threads <= 0 means cores / local_ranks. The
// backend computes in `precision` (the CUDA backend in FP16 only, so far:
// bf16 on a GPU is an error naming --device cpu).
DeviceChoice select_device(const std::string& device, int local_rank, int local_ranks, int cpu_threads,
                           const std::string& host, Precision precision = Precision::Fp16);

}  // namespace ddp
