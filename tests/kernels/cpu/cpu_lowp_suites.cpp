// cpu_lowp_suites.cpp: the precision-generic CPU kernel suites
// (cpu_kernel_support.h), instantiated once for the whole binary, for FP16
// and BF16: every TEST_P of the suites, in whichever test_cpu_*.cpp, runs
// as Precisions/<suite>.<test>/fp16 and .../bf16.
#include <gtest/gtest.h>

#include "cpu_kernel_support.h"

namespace ddp::test {

INSTANTIATE_TEST_SUITE_P(Precisions, CpuLowpKernels, ::testing::ValuesIn(kBothPrecisions), precision_test_name);
INSTANTIATE_TEST_SUITE_P(Precisions, CpuLowpKernelsThreaded, ::testing::ValuesIn(kBothPrecisions), precision_test_name);

}  // namespace ddp::test
