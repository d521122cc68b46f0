// nccl_check.h: DDP_NCCL_CHECK(call) throws ddp::Error with file:line, the
// call and both of NCCL's texts: ncclGetErrorString (the code) and
// ncclGetLastError (what went wrong, e.g. which peer or transport).
#pragma once

#include <nccl.h>

#include <string>

#include "kernels/error.h"

#define DDP_NCCL_CHECK(call)                                                                                 \
  do {                                                                                                       \
    const ncclResult_t ddp_nccl_rc_ = (call);                                                                \
    if (ddp_nccl_rc_ != ncclSuccess && ddp_nccl_rc_ != ncclInProgress) {                                     \
      const char* last = ncclGetLastError(nullptr);                                                          \
      throw ::ddp::Error(::ddp::format_call_error(                                                           \
          __FILE__, __LINE__, #call,                                                                         \
          std::string(ncclGetErrorString(ddp_nccl_rc_)) + (last && *last ? std::string(": ") + last : ""))); \
    }                                                                                                        \
  } while (0)
