// op_dispatch.h: how an op reaches the code of the device it runs on.
//
// An op is a unit of four files (docs/design.md, "Ops as units"):
//   kernels/ops/<op>.h         its argument struct (named fields), its
//                              contract (rounding points, summation order,
//                              in-place rules) and one entry point,
//                              `<op>(backend, args)`;
//   kernels/ops/<op>_cpu.cpp   the CPU row: the reference, always built;
//   kernels/ops/<op>_cuda.cu   the CUDA row: its kernels and launcher, built
//                              by nvcc for the GPU and by g++ for the SIMT
//                              executor (kernels/simt/);
//   tests/kernels/ops/test_<op>.cpp.
// The entry point hands its arguments to run_op with the two rows; run_op
// picks the row by the rows the backend set when it was made (Backend::
// OpRows). The CUDA row is named only in CUDA builds (DDP_CUDA_ROW), so a
// CPU build neither compiles nor links any CUDA code, and a CUDA build that
// lacks a row fails to link instead of failing on the GPU.
#pragma once

#include <string>
#include <utility>

#include "kernels/backend.h"
#include "kernels/error.h"

namespace ddp {

template <class Op>
using CpuRow = void (*)(CpuBackend& cpu, const Op& op);
template <class Op>
using CudaRow = void (*)(CudaOpContext& cuda, const Op& op);

// The CUDA row of an op where this build has CUDA, else a null row of the
// same type (decltype only reads the declaration: nothing is linked).
#if defined(DDP_HAVE_CUDA)
#define DDP_CUDA_ROW(row) (&(row))
#else
#define DDP_CUDA_ROW(row) (static_cast<decltype(&(row))>(nullptr))
#endif

// Runs `op` on `backend`'s device, or hands it to the backend's forwarder
// (with a call that runs it on whichever backend the forwarder gives it,
// the arguments copied into it: a recording replays them as they were).
template <class Op>
void run_op(Backend& backend, const Op& op, CpuRow<Op> cpu_row, CudaRow<Op> cuda_row) {
  const Backend::OpRows& rows = backend.op_rows();
  if (rows.cpu) return cpu_row(*rows.cpu, op);
  if (rows.cuda) {
    if (!cuda_row) throw Error(std::string(Op::kName) + ": this build has no CUDA code");
    return cuda_row(*rows.cuda, op);
  }
  if (rows.forwarder) {
    return rows.forwarder->forward_op(
        Op::kName, [op, cpu_row, cuda_row](Backend& target) { run_op(target, op, cpu_row, cuda_row); });
  }
  throw Error(std::string(Op::kName) + ": " + backend.description() + " runs no ops");
}

}  // namespace ddp
