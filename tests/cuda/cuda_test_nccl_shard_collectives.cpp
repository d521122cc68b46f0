// cuda_test_nccl_shard_collectives.cpp: NcclCommunicator's reduce-scatter,
// all-gather and device MAX all-reduce as a world of one on GPU 0 (skipped
// without a GPU). One rank's range is the whole buffer, so both collectives
// must reproduce their input bit for bit, in place too; the ordering test
// holds compute_stream with a sleeping host callback, so a missing fence
// would let comm_stream read the poison. Uneven layouts (the padded
// staging path) need two ranks, i.e. two GPUs: the MPI suites check the
// same layouts' results on CPUs.
#include <gtest/gtest.h>

#include <cmath>

#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime.h>

#include "comm/nccl_communicator.h"
#include "comm/shard_layout.h"
#include "kernels/buffer.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/error.h"
#include "support/test_support.h"
#include "support/gpu_test.h"

namespace ddp {
namespace {

constexpr size_t kOddCount = 1'000'003;

bool same_bits(const std::vector<lowp16>& a, const std::vector<lowp16>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(lowp16)) == 0);
}

void CUDART_CB hold_stream_100ms(void*) { std::this_thread::sleep_for(std::chrono::milliseconds(100)); }

class NcclShards1Rank : public test::GpuTest {
 protected:
  NcclShards1Rank() : rng(test::test_seed()) {}
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    gpu = std::make_unique<CudaBackend>(0);
    comm = std::make_unique<NcclCommunicator>(0, 1, gpu->compute_stream());
  }
  std::vector<lowp16> download(Buffer<lowp16>& b) {
    std::vector<lowp16> host = test::poison_halves(b.count());
    gpu->copy_to_host(host.data(), b.data(), b.size_bytes());
    return host;
  }

  std::mt19937_64 rng;
  std::unique_ptr<CudaBackend> gpu;  // declared first: the communicator goes before the backend's stream
  std::unique_ptr<NcclCommunicator> comm;
};

TEST_F(NcclShards1Rank, ReduceScatterAndAllgatherOfOneRankKeepEveryBit) {
  const ShardLayout layout = ShardLayout::balanced(kOddCount, 1, 64);
  const std::vector<lowp16> want = test::random_halves(rng, kOddCount, -1000.0f, 1000.0f);
  Buffer<lowp16> send_lowp(*gpu, kOddCount), recv_lowp(*gpu, kOddCount);
  send_lowp.upload(want);
  recv_lowp.upload(test::poison_halves(kOddCount));
  comm->reduce_scatter_sum_lowp(send_lowp.data(), recv_lowp.data(), layout);
  EXPECT_TRUE(same_bits(download(recv_lowp), want)) << "reduce-scatter";
  recv_lowp.upload(test::poison_halves(kOddCount));
  comm->allgather_lowp(send_lowp.data(), recv_lowp.data(), layout);
  EXPECT_TRUE(same_bits(download(recv_lowp), want)) << "all-gather";
  comm->reduce_scatter_sum_lowp(send_lowp.data(), send_lowp.data(), layout);
  comm->allgather_lowp(send_lowp.data(), send_lowp.data(), layout);
  EXPECT_TRUE(same_bits(download(send_lowp), want)) << "in place";
  EXPECT_NO_THROW(comm->reduce_scatter_sum_lowp(nullptr, nullptr, ShardLayout::balanced(0, 1, 64)));
  EXPECT_NO_THROW(comm->allgather_lowp(nullptr, nullptr, ShardLayout::balanced(0, 1, 64)));
}

// --grad-reduce-dtype fp32's reduce-scatter (ncclFloat32), in place and
// not: one rank's sum is its input. (One rank's layout is always uniform:
// the padded plan in FP32 runs in MpiPaddedCollectives on CPU ranks.)
TEST_F(NcclShards1Rank, Fp32ReduceScatterOfOneRankKeepsEveryBit) {
  const std::vector<float> want = test::random_floats(rng, kOddCount, -1000.0f, 1000.0f);
  for (const size_t align : {size_t{1}, size_t{64}}) {
    const ShardLayout layout = ShardLayout::balanced(kOddCount, 1, align);
    Buffer<float> send(*gpu, kOddCount), recv(*gpu, kOddCount);
    send.upload(want);
    recv.upload(std::vector<float>(kOddCount, std::nanf("")));
    comm->start_reduce_scatter_sum_fp32(send.data(), recv.data(), layout);
    comm->start_reduce_scatter_sum_fp32(send.data(), send.data(), layout);
    comm->wait_allreduces();
    EXPECT_EQ(recv.download(), want) << "align " << align;
    EXPECT_EQ(send.download(), want) << "in place, align " << align;
  }
}

// The started forms are fenced like the all-reduce: comm_stream waits for
// the compute stream's late copy, and the compute stream's download waits
// for the collectives.
TEST_F(NcclShards1Rank, StartedCollectivesAreFencedWithTheComputeStream) {
  const ShardLayout layout = ShardLayout::balanced(kOddCount, 1, 1);
  const std::vector<lowp16> want = test::random_halves(rng, kOddCount);
  Buffer<lowp16> source_lowp(*gpu, kOddCount), send_lowp(*gpu, kOddCount), mid_lowp(*gpu, kOddCount),
      full_lowp(*gpu, kOddCount);
  source_lowp.upload(want);
  send_lowp.upload(test::poison_halves(kOddCount));
  full_lowp.upload(test::poison_halves(kOddCount));
  DDP_CUDA_CHECK(cudaLaunchHostFunc(gpu->compute_stream(), hold_stream_100ms, nullptr));
  gpu->copy_on_device(send_lowp.data(), source_lowp.data(), send_lowp.size_bytes());
  comm->start_reduce_scatter_sum_lowp(send_lowp.data(), mid_lowp.data(), layout);
  comm->start_allgather_lowp(mid_lowp.data(), full_lowp.data(), layout);
  comm->wait_allreduces();
  EXPECT_TRUE(same_bits(download(full_lowp), want));
  const AllreduceTimes t = comm->take_allreduce_times();
  EXPECT_GE(t.busy_s, 0.0);
}

TEST_F(NcclShards1Rank, Int32MaxOfOneRankKeepsTheFlags) {
  const std::vector<int32_t> want = {0, 1, -7, 1 << 30};
  Buffer<int32_t> flags(*gpu, want.size());
  flags.upload(want);
  comm->allreduce_max_int32(flags.data(), want.size());
  std::vector<int32_t> got(want.size(), -1);
  gpu->copy_to_host(got.data(), flags.data(), flags.size_bytes());
  EXPECT_EQ(got, want);
}

TEST_F(NcclShards1Rank, AnotherWorldsLayoutIsRefused) {
  Buffer<lowp16> data_lowp(*gpu, 16);
  EXPECT_THROW(comm->reduce_scatter_sum_lowp(data_lowp.data(), data_lowp.data(), ShardLayout::balanced(16, 2, 1)),
               Error);
  EXPECT_THROW(comm->allgather_lowp(data_lowp.data(), data_lowp.data(), ShardLayout::balanced(16, 2, 1)), Error);
}

}  // namespace
}  // namespace ddp
