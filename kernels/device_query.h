// device_query.h: how many CUDA devices this process can use, without ever
// failing. Any error from cudaGetDeviceCount (on a machine without a driver it
// is cudaErrorInsufficientDriver, not zero devices) means "no GPU"; the reason
// is returned for a one-line message. Built without CUDA: always 0.
#pragma once

#include <string>

namespace ddp {

int visible_cuda_devices(std::string* why_none = nullptr);

}  // namespace ddp
