// cpu_blas_single_threaded.h: a scope in which the BLAS runs each call on
// the calling thread. Our pool's threads each run BLAS calls (cpu_gemm.cpp,
// cpu_flash_attention.cpp): the BLAS must not start threads of its own
// inside them. Restores the BLAS's setting afterwards, so other BLAS users
// in the process (bench_kernels' SGEMM reference) keep theirs.
#pragma once

#include "kernels/cpu/cpu_backend.h"

namespace ddp {

class BlasSingleThreaded {
 public:
  BlasSingleThreaded() : saved_(set_blas_threads(0)) {
    if (saved_ != 1) set_blas_threads(1);
  }
  ~BlasSingleThreaded() {
    if (saved_ != 1) set_blas_threads(saved_);
  }
  BlasSingleThreaded(const BlasSingleThreaded&) = delete;
  BlasSingleThreaded& operator=(const BlasSingleThreaded&) = delete;

 private:
  int saved_;
};

}  // namespace ddp
