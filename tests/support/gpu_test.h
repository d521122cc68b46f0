// gpu_test.h: the fixture of the suites that need a GPU. Where none is
// visible (no device, no driver, a device the build has no code for) each
// test skips with the reason instead of failing, so the CUDA suites build
// and run on every machine and report what they could not check. A suite's
// own fixture derives from it and returns from its SetUp when IsSkipped().
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "kernels/device_query.h"

namespace ddp::test {

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (visible_cuda_devices(&why) == 0) GTEST_SKIP() << "no GPU: " << why;
  }
};

}  // namespace ddp::test
