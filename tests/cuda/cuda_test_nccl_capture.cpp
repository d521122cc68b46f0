// cuda_test_nccl_capture.cpp: NCCL collectives inside a CUDA graph, as
// --cuda-graph records them (one-rank NcclCommunicator on GPU 0): a kernel
// writes the buffer, the all-reduce sums it on comm_stream (forked from the
// capturing compute stream by an event, joined back by another), a kernel
// reads and scales it. Replayed with fresh inputs each time, every replay
// must give the eager CPU backend's bits: a graph that froze its first
// inputs, lost the fork or join (the NCCL node left out of the graph), or
// broke the communicator for eager use afterwards would show. Also the
// version rules behind NcclCommunicator::supports_capture, which need no GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "comm/nccl_communicator.h"
#include "kernels/ops/elementwise.h"
#include "kernels/ops/unscale.h"
#include "kernels/buffer.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/error.h"
#include "support/test_support.h"
#include "support/gpu_test.h"

namespace ddp {
namespace {

using test::bits_of;

// Index of the first element whose bits differ, or -1 when all match.
long first_mismatch(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (bits_of(got[i]) != bits_of(want[i])) return static_cast<long>(i);
  return -1;
}

class NcclCapture : public test::GpuTest {
 protected:
  NcclCapture() : rng(test::test_seed()) {}
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    gpu = std::make_unique<CudaBackend>(0);
    comm = std::make_unique<NcclCommunicator>(0, 1, gpu->compute_stream());
    if (!comm->supports_capture()) GTEST_SKIP() << comm->capture_unsupported_reason();
  }
  // A graph that holds NCCL work goes before the communicator (NCCL's
  // teardown waits for such graphs), the communicator before the stream.
  void TearDown() override {
    if (gpu) gpu->release_captures();
    comm.reset();
    gpu.reset();
  }

  std::mt19937_64 rng;
  std::unique_ptr<CudaBackend> gpu;
  std::unique_ptr<NcclCommunicator> comm;
};

TEST_F(NcclCapture, AllreduceBetweenTwoKernelsReplaysWithFreshInputs) {
  SCOPED_TRACE("seed " + std::to_string(test::test_seed()) + " (set DDP_TEST_SEED to reproduce)");
  const size_t n = 300007;  // odd: a tail a kernel or NCCL forgot would show
  CpuBackend cpu(1);
  Buffer<float> input_fp32(*gpu, n), out_fp32(*gpu, n), inv_scale(*gpu, 1);
  Buffer<lowp16> grads_lowp(*gpu, n);
  Buffer<int32_t> nonfinite(*gpu, 1);
  // Everything the capture touches exists before it (no allocation inside).
  gpu->begin_capture();
  comm->set_capturing(true);
  CastFp32ToLowp cast;  // writes the buffer
  cast.src = input_fp32.data();
  cast.dst = grads_lowp.data();
  cast.count = n;
  cast_fp32_to_lowp(*gpu, cast);
  comm->start_allreduce_sum_lowp(grads_lowp.data(), n);
  comm->wait_allreduces();
  UnscaleLowpToFp32 unscale;  // reads and scales it
  unscale.grads_lowp = grads_lowp.data();
  unscale.grads_fp32 = out_fp32.data();
  unscale.count = n;
  unscale.inv_scale = ScalarArg::at(inv_scale.data());
  unscale.nonfinite_flag = nonfinite.data();
  unscale_lowp_to_fp32(*gpu, unscale);
  comm->set_capturing(false);
  const int graph = gpu->end_capture();

  for (int replay = 0; replay < 5; ++replay) {
    SCOPED_TRACE("replay " + std::to_string(replay));
    std::vector<float> input = test::random_floats(rng, n, -100.0f, 100.0f);
    const bool overflow = replay == 3;  // above FP16's 65504: Inf after the cast, flagged by the reader
    if (overflow) input[rng() % n] = 1e6f;
    const float scale = 1.0f / static_cast<float>(1 + rng() % 1000);
    const int32_t clear = 0;
    input_fp32.upload(input);
    inv_scale.upload(&scale, 1);
    nonfinite.upload(&clear, 1);
    out_fp32.upload(std::vector<float>(n, std::nanf("")));  // poison
    gpu->replay(graph);

    // The reference: the same two kernels on the CPU; a one-rank sum is the identity.
    Buffer<float> cpu_in(cpu, n), cpu_out(cpu, n);
    Buffer<lowp16> cpu_grads(cpu, n);
    int32_t cpu_flag = 0;
    cpu_in.upload(input);
    CastFp32ToLowp cpu_cast;
    cpu_cast.src = cpu_in.data();
    cpu_cast.dst = cpu_grads.data();
    cpu_cast.count = n;
    cast_fp32_to_lowp(cpu, cpu_cast);
    UnscaleLowpToFp32 cpu_unscale;
    cpu_unscale.grads_lowp = cpu_grads.data();
    cpu_unscale.grads_fp32 = cpu_out.data();
    cpu_unscale.count = n;
    cpu_unscale.inv_scale = scale;
    cpu_unscale.nonfinite_flag = &cpu_flag;
    unscale_lowp_to_fp32(cpu, cpu_unscale);

    EXPECT_EQ(first_mismatch(out_fp32.download(), cpu_out.download()), -1);
    EXPECT_EQ(nonfinite.download()[0] != 0, overflow);
    EXPECT_EQ(nonfinite.download()[0] != 0, cpu_flag != 0);
  }
  // Captured collectives are not timed (no timing event inside a graph).
  EXPECT_EQ(comm->take_allreduce_times().busy_s, 0.0);

  // The communicator still works eagerly after the capture and its replays.
  const std::vector<lowp16> want = test::random_halves(rng, n, -1000.0f, 1000.0f);
  grads_lowp.upload(want);
  comm->allreduce_sum_lowp(grads_lowp.data(), n);
  const std::vector<lowp16> got = grads_lowp.download();
  size_t differ = 0;
  for (size_t i = 0; i < n; ++i) differ += got[i].bits != want[i].bits;
  EXPECT_EQ(differ, 0u) << "an eager one-rank all-reduce after the replays changed the data";
}

// ncclGetVersion's two encodings (2.9 changed it) and the capture rule.
// No GPU needed: these run wherever NCCL is built.
TEST(NcclVersion, TextAndCaptureSupportFollowBothEncodings) {
  EXPECT_EQ(nccl_version_text(2804), "2.8.4");
  EXPECT_EQ(nccl_version_text(2708), "2.7.8");
  EXPECT_EQ(nccl_version_text(20906), "2.9.6");
  EXPECT_EQ(nccl_version_text(22809), "2.28.9");
  EXPECT_FALSE(nccl_version_supports_capture(2804));
  EXPECT_FALSE(nccl_version_supports_capture(2899));
  EXPECT_TRUE(nccl_version_supports_capture(20900));
  EXPECT_TRUE(nccl_version_supports_capture(22809));
}

TEST(NcclVersion, AnUncapturableVersionSaysWhichAndWhatIsNeeded) {
  const std::string reason = nccl_capture_unsupported_reason(2804);
  EXPECT_NE(reason.find("NCCL 2.8.4"), std::string::npos) << reason;
  EXPECT_NE(reason.find(">= 2.9"), std::string::npos) << reason;
  EXPECT_EQ(reason.find('\n'), std::string::npos) << "one line";
  EXPECT_EQ(nccl_capture_unsupported_reason(20906), "");
}

}  // namespace
}  // namespace ddp
