// test_simt_executor.cpp: the SIMT executor runs CUDA's execution model
// (indices, shared memory per block, barriers, warp exchanges) and refuses
// what a GPU would not forgive, each refusal an error naming the kernel and
// the rule. The kernels are in simt_test_kernels.cu.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/error.h"
#include "simt/simt_test_kernels.h"
#include "support/device_array.h"
#include "support/test_support.h"

namespace ddp::test {
namespace {

std::vector<float> random_values(size_t n) {
  std::mt19937_64 rng(test_seed());
  return random_floats(rng, n, -1.0f, 1.0f);
}

// The error a launch throws, or "" when it succeeds.
template <class Launch>
std::string launch_error(Launch&& launch) {
  try {
    launch();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_LAUNCH_FAILS(launch, kernel, rule)                        \
  do {                                                                   \
    const std::string error = launch_error([&] { launch; });             \
    EXPECT_NE(error.find("kernel " kernel), std::string::npos) << error; \
    EXPECT_NE(error.find(rule), std::string::npos) << error;             \
  } while (0)

TEST(SimtExecutor, SharedMemoryIsPerBlockAndTheBarrierOrdersIt) {
  const int rows = 5, n = 96;
  const std::vector<float> in = random_values(static_cast<size_t>(rows) * n);
  DeviceArray<float> d_in(in), d_out(std::vector<float>(in.size(), NAN));
  simt_test::reverse_rows(d_in.get(), d_out.get(), rows, n, true);
  const std::vector<float> out = d_out.download();
  for (int r = 0; r < rows; ++r)
    for (int i = 0; i < n; ++i)
      ASSERT_EQ(out[static_cast<size_t>(r * n + i)], in[static_cast<size_t>(r * n + n - 1 - i)]);
}

TEST(SimtExecutor, AMissingBarrierIsASharedMemoryRace) {
  DeviceArray<float> d_in(random_values(64)), d_out(64);
  EXPECT_LAUNCH_FAILS(simt_test::reverse_rows(d_in.get(), d_out.get(), 1, 64, false), "reverse_kernel",
                      "shared-memory race");
}

TEST(SimtExecutor, ASyncwarpOrdersLanesOfOneWarpAndItsAbsenceIsARace) {
  DeviceArray<float> d_out(std::vector<float>{NAN});
  simt_test::lane_handoff(d_out.get(), true);
  EXPECT_EQ(d_out.download()[0], 42.0f);
  EXPECT_LAUNCH_FAILS(simt_test::lane_handoff(d_out.get(), false), "handoff_kernel", "shared-memory race");
}

TEST(SimtExecutor, ASyncwarpOrdersOnlyTheLanesItNamesAfterTheirLatestAccess) {
  DeviceArray<float> d_out(32);
  EXPECT_EQ(launch_error([&] { simt_test::syncwarp_pattern(d_out.get(), 0); }), "");
  EXPECT_EQ(d_out.download()[0], 1.0f);
  EXPECT_EQ(launch_error([&] { simt_test::syncwarp_pattern(d_out.get(), 1); }), "");
  EXPECT_LAUNCH_FAILS(simt_test::syncwarp_pattern(d_out.get(), 2), "syncwarp_pattern_kernel",
                      "thread (1,0,0) writes a byte that thread (0,0,0) read");
  EXPECT_LAUNCH_FAILS(simt_test::syncwarp_pattern(d_out.get(), 3), "syncwarp_pattern_kernel",
                      "thread (3,0,0) reads a byte that thread (1,0,0) wrote");
}

TEST(SimtExecutor, AShuffleAtTwoLinesWithOneMaskIsOneExchange) {
  DeviceArray<float> d_out(std::vector<float>(32, NAN));
  simt_test::shuffle_in_both_branches(d_out.get());
  const std::vector<float> out = d_out.download();
  for (int lane = 0; lane < 32; ++lane) EXPECT_EQ(out[static_cast<size_t>(lane)], static_cast<float>(lane ^ 16));
}

TEST(SimtExecutor, ANarrowXorShuffleMayReadAnEarlierSegmentOnly) {
  DeviceArray<float> d_out(std::vector<float>(32, NAN));
  simt_test::shuffle_xor_narrow(d_out.get());
  const std::vector<float> out = d_out.download();
  for (int lane = 0; lane < 32; ++lane)
    EXPECT_EQ(out[static_cast<size_t>(lane)], static_cast<float>(lane < 16 ? lane : lane - 16)) << lane;
}

TEST(SimtExecutor, XorButterflyGivesEveryLaneItsWarpsSum) {
  const int threads = 256;
  const std::vector<float> in = random_values(threads);
  DeviceArray<float> d_in(in), d_out(std::vector<float>(threads, NAN));
  simt_test::warp_sums(d_in.get(), d_out.get(), threads);
  const std::vector<float> out = d_out.download();
  for (int w = 0; w < threads / 32; ++w) {
    // The butterfly's order, in FP32: the same bits as lockstep hardware.
    std::vector<float> v(in.begin() + w * 32, in.begin() + w * 32 + 32);
    for (int offset = 16; offset > 0; offset >>= 1) {
      std::vector<float> next(32);
      for (int lane = 0; lane < 32; ++lane) next[lane] = v[lane] + v[lane ^ offset];
      v = next;
    }
    for (int lane = 0; lane < 32; ++lane) ASSERT_EQ(out[static_cast<size_t>(w * 32 + lane)], v[lane]) << lane;
  }
}

TEST(SimtExecutor, ShuffleUpDownIndexedAndVotesFollowCudasDefinitions) {
  const int threads = 64;
  const std::vector<float> in = random_values(threads);
  DeviceArray<float> d_in(in), d_out(std::vector<float>(6 * threads, NAN));
  simt_test::warp_intrinsics(d_in.get(), d_out.get(), threads);
  const std::vector<float> out = d_out.download();
  for (int w = 0; w < threads / 32; ++w) {
    unsigned ballot = 0;
    for (int lane = 0; lane < 32; ++lane)
      if (in[static_cast<size_t>(w * 32 + lane)] > 0.0f) ballot |= 1u << lane;
    for (int lane = 0; lane < 32; ++lane) {
      const size_t i = static_cast<size_t>(w * 32 + lane);
      const float* o = &out[6 * i];
      EXPECT_EQ(o[0], in[lane < 31 ? i + 1 : i]) << "down " << i;  // past the warp: its own value
      EXPECT_EQ(o[1], in[lane > 0 ? i - 1 : i]) << "up " << i;
      EXPECT_EQ(o[2], in[static_cast<size_t>(w * 32 + 3)]) << "indexed " << i;
      EXPECT_EQ(o[3], static_cast<float>(ballot & 0xffffu)) << "ballot " << i;
      EXPECT_EQ(o[4], ballot != 0 ? 1.0f : 0.0f) << "any " << i;
      EXPECT_EQ(o[5], ballot == 0xffffffffu ? 1.0f : 0.0f) << "all " << i;
    }
  }
}

TEST(SimtExecutor, BlockAndThreadIndicesCoverTheGridOnce) {
  const unsigned gx = 3, gy = 2, bx = 4, by = 3, bz = 2;
  const size_t count = static_cast<size_t>(gx) * gy * bx * by * bz;
  DeviceArray<float> d_out(std::vector<float>(count, NAN));
  simt_test::index_map(d_out.get(), gx, gy, bx, by, bz);
  const std::vector<float> out = d_out.download();
  size_t i = 0;
  for (unsigned y = 0; y < gy; ++y)
    for (unsigned x = 0; x < gx; ++x)
      for (unsigned tz = 0; tz < bz; ++tz)
        for (unsigned ty = 0; ty < by; ++ty)
          for (unsigned tx = 0; tx < bx; ++tx)
            ASSERT_EQ(out[i++], static_cast<float>((y * 10 + x) * 1000 + tz * 100 + ty * 10 + tx));
}

TEST(SimtExecutor, AShuffleNamingAnExitedLaneIsRefused) {
  DeviceArray<float> d_out(32);
  EXPECT_LAUNCH_FAILS(simt_test::shuffle_after_exit(d_out.get()), "exit_then_shuffle_kernel",
                      "(lane 16) exits while lanes {0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15} of its warp wait for it");
}

TEST(SimtExecutor, AFullMaskInAPartialWarpIsRefused) {
  DeviceArray<float> d_out(48);
  EXPECT_LAUNCH_FAILS(simt_test::shuffle_in_partial_warp(d_out.get(), 48), "partial_warp_kernel", "does not have");
}

TEST(SimtExecutor, BarriersAtTwoLinesAreDivergent) {
  DeviceArray<float> d_out(64);
  EXPECT_LAUNCH_FAILS(simt_test::barrier_at_two_lines(d_out.get()), "two_barriers_kernel", "divergent __syncthreads()");
}

TEST(SimtExecutor, AShuffleWhoseLanesWaitAtABarrierIsRefused) {
  DeviceArray<float> d_out(32);
  EXPECT_LAUNCH_FAILS(simt_test::shuffle_against_barrier(d_out.get()), "shuffle_against_barrier_kernel",
                      "wait for it at the shuffle");
}

TEST(SimtExecutor, OnePastAnAllocationIsAnOutOfBoundsWrite) {
  DeviceArray<float> d_out(100);
  simt_test::write_through(d_out.get(), 99);  // the last element: fine
  EXPECT_LAUNCH_FAILS(simt_test::write_through(d_out.get(), 100), "write_kernel",
                      "out-of-bounds global write by thread (36,0,0): 4 bytes at offset 400 of a 400-byte allocation");
}

TEST(SimtExecutor, PastTheDynamicSharedMemoryIsOutOfBounds) {
  DeviceArray<float> d_out(1);
  simt_test::dynamic_shared_write(d_out.get(), 255);
  EXPECT_EQ(d_out.download()[0], 1.0f);
  EXPECT_LAUNCH_FAILS(simt_test::dynamic_shared_write(d_out.get(), 256), "dynamic_shared_kernel",
                      "out-of-bounds dynamic shared memory write");
  EXPECT_LAUNCH_FAILS(simt_test::dynamic_shared_write(d_out.get(), 2000), "dynamic_shared_kernel",
                      "4 bytes at offset 8000 of the launch's 1024 bytes");
  EXPECT_LAUNCH_FAILS(simt_test::dynamic_shared_write(d_out.get(), -200), "dynamic_shared_kernel",
                      "4 bytes at offset -800 of the launch's 1024 bytes");
}

TEST(SimtExecutor, PastAStaticSharedArrayIsOutOfBounds) {
  DeviceArray<float> d_out(1);
  simt_test::static_shared_write(d_out.get(), 31);
  EXPECT_LAUNCH_FAILS(simt_test::static_shared_write(d_out.get(), 32), "static_shared_kernel",
                      "index 32 out of bounds for type 'float [32]'");
}

TEST(SimtExecutor, ShapesOverCudasLimitsAreRefused) {
  EXPECT_LAUNCH_FAILS(simt_test::shaped_launch(1, 1, 1025, 1, 1), "empty_kernel", "over CUDA's limits");
  EXPECT_LAUNCH_FAILS(simt_test::shaped_launch(1, 1, 32, 32, 2), "empty_kernel", "at most 1024 threads");
  EXPECT_LAUNCH_FAILS(simt_test::shaped_launch(1, 65536, 32, 1, 1), "empty_kernel", "grid (1,65536,1)");
  EXPECT_LAUNCH_FAILS(simt_test::shaped_launch(0, 1, 32, 1, 1), "empty_kernel", "grid (0,1,1)");
  EXPECT_EQ(launch_error([] { simt_test::shaped_launch(70000, 1, 1, 1, 1); }), "");  // x may pass 65535
}

TEST(SimtExecutor, DynamicSharedMemoryPast48KbNeedsTheOptInOnThatDevice) {
  DeviceArray<float> d_out(32);
  const size_t bytes = 100 * 1024;
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  EXPECT_LAUNCH_FAILS(simt_test::big_shared_launch(d_out.get(), bytes, false), "big_shared_kernel",
                      "cudaFuncSetAttribute");
  simt_test::big_shared_launch(d_out.get(), bytes, true);
  EXPECT_EQ(d_out.download()[0], 2.0f);
  // The allowance is the device's: device 1 has not been told.
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  EXPECT_LAUNCH_FAILS(simt_test::big_shared_launch(d_out.get(), bytes, false), "big_shared_kernel",
                      "on device 1 it may have 49152");
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
}

}  // namespace
}  // namespace ddp::test
