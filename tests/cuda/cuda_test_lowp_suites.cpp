// cuda_test_lowp_suites.cpp: the precision-generic CUDA suites
// (cuda_test_support.h: CudaLowpKernels), instantiated once for the whole
// binary, for FP16 and BF16: every TEST_P of the fixture, in whichever
// cuda_test_*.cpp, runs as Precisions/CudaLowpKernels.<test>/fp16 and
// .../bf16, CudaBackend against CpuBackend in that precision.
#include <gtest/gtest.h>

#include "cuda_test_support.h"

namespace ddp::test {

INSTANTIATE_TEST_SUITE_P(Precisions, CudaLowpKernels, ::testing::ValuesIn(kBothPrecisions), precision_test_name);

}  // namespace ddp::test
