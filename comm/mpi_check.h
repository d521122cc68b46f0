// mpi_check.h: DDP_MPI_CHECK(call) throws ddp::Error with file:line, the call
// and MPI's own error text (MPI_Error_string). Requires the communicator's
// error handler to be MPI_ERRORS_RETURN, which the MPI environment sets.
#pragma once

#include <mpi.h>

#include <string>

#include "kernels/error.h"

namespace ddp {
inline std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, len);
}
}  // namespace ddp

#define DDP_MPI_CHECK(call)                                                                                        \
  do {                                                                                                             \
    const int ddp_mpi_rc_ = (call);                                                                                \
    if (ddp_mpi_rc_ != MPI_SUCCESS)                                                                                \
      throw ::ddp::Error(::ddp::format_call_error(__FILE__, __LINE__, #call, ::ddp::mpi_error_text(ddp_mpi_rc_))); \
  } while (0)
