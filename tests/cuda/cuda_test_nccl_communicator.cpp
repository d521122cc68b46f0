// cuda_test_nccl_communicator.cpp: NcclCommunicator as a world of one on GPU
// 0. A one-rank sum or broadcast leaves the data unchanged bit for bit, which
// is the closed-form expectation; the ordering tests hold one stream with a
// sleeping host callback, so a missing event fence between comm_stream and
// compute_stream would let the other stream read the poison instead. The
// NcclCommunicator tests skip with the reason where no GPU is visible; the
// NcclCommunicatorArgs tests fail before any CUDA call and run everywhere
// NCCL is built. Multi-rank sums are checked by the MPI suites.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime.h>

#include "comm/nccl_communicator.h"
#include "kernels/buffer.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/error.h"
#include "support/test_support.h"
#include "support/gpu_test.h"

namespace ddp {
namespace {

// Odd, and not a multiple of any vector width or NCCL chunk, so a tail that
// a collective forgot would show.
constexpr size_t kOddCount = 1'000'003;

std::string seed_text() { return "seed " + std::to_string(test::test_seed()) + " (set DDP_TEST_SEED to reproduce)"; }

// Index of the first element whose bits differ, or -1 when all match.
template <class T, class Bits>
long first_mismatch(const std::vector<T>& got, const std::vector<T>& want, Bits bits) {
  if (got.size() != want.size()) return 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (bits(got[i]) != bits(want[i])) return static_cast<long>(i);
  return -1;
}
long first_mismatch(const std::vector<lowp16>& got, const std::vector<lowp16>& want) {
  return first_mismatch(got, want, [](lowp16 h) { return h.bits; });
}

// Holds the stream it is queued on far longer than a 2 MB copy takes.
void CUDART_CB hold_stream_100ms(void*) { std::this_thread::sleep_for(std::chrono::milliseconds(100)); }

// Both collectives through one signature (FP16 elements), so each ordering
// test covers both.
struct Collective {
  const char* name;
  std::function<void(NcclCommunicator&, lowp16*, size_t count)> run;
};
const Collective kCollectives[] = {
    {"allreduce_sum_lowp", [](NcclCommunicator& c, lowp16* p, size_t count) { c.allreduce_sum_lowp(p, count); }},
    {"broadcast_bytes",
     [](NcclCommunicator& c, lowp16* p, size_t count) { c.broadcast_bytes(p, count * sizeof(lowp16), 0); }},
};

class NcclCommunicator1Rank : public test::GpuTest {
 protected:
  NcclCommunicator1Rank() : rng(test::test_seed()) {}
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    gpu = std::make_unique<CudaBackend>(0);
    comm = std::make_unique<NcclCommunicator>(0, 1, gpu->compute_stream());
  }

  std::mt19937_64 rng;
  // Declaration order: the communicator goes before the backend's stream.
  std::unique_ptr<CudaBackend> gpu;
  std::unique_ptr<NcclCommunicator> comm;
};

TEST_F(NcclCommunicator1Rank, NameAndPlace) {
  EXPECT_EQ(comm->name().rfind("NCCL ", 0), 0u) << comm->name();
  EXPECT_EQ(comm->rank(), 0);
  EXPECT_EQ(comm->world_size(), 1);
  EXPECT_NE(comm->comm_stream(), nullptr);
  EXPECT_NE(comm->comm_stream(), gpu->compute_stream());
}

TEST_F(NcclCommunicator1Rank, AllreduceFp16OfOneRankKeepsEveryBit) {
  SCOPED_TRACE(seed_text());
  const std::vector<lowp16> want = test::random_halves(rng, kOddCount, -1000.0f, 1000.0f);
  Buffer<lowp16> grads_lowp(*gpu, kOddCount);
  grads_lowp.upload(want);
  comm->allreduce_sum_lowp(grads_lowp.data(), kOddCount);
  std::vector<lowp16> got = test::poison_halves(kOddCount);
  gpu->copy_to_host(got.data(), grads_lowp.data(), grads_lowp.size_bytes());
  EXPECT_EQ(first_mismatch(got, want), -1);
}

// --grad-reduce-dtype fp32's sum (ncclFloat32): at one rank every bit kept.
TEST_F(NcclCommunicator1Rank, AllreduceFp32OfOneRankKeepsEveryBit) {
  SCOPED_TRACE(seed_text());
  const std::vector<float> want = test::random_floats(rng, kOddCount, -1000.0f, 1000.0f);
  Buffer<float> sums(*gpu, kOddCount);
  sums.upload(want);
  comm->start_allreduce_sum_fp32(sums.data(), kOddCount);
  comm->wait_allreduces();
  EXPECT_EQ(sums.download(), want);
}

// The metrics' all-reduce times: device time of each all-reduce (and of the
// compute stream's wait) since the last read, then nothing until the next.
TEST_F(NcclCommunicator1Rank, AllreduceTimeIsTakenOnce) {
  Buffer<lowp16> grads_lowp(*gpu, kOddCount);
  grads_lowp.upload(test::random_halves(rng, kOddCount));
  EXPECT_EQ(comm->take_allreduce_times().busy_s, 0.0);
  for (int i = 0; i < 3; ++i) comm->allreduce_sum_lowp(grads_lowp.data(), kOddCount);
  const AllreduceTimes t = comm->take_allreduce_times();
  // One rank in place may launch nothing: the events can be 0 ms apart.
  EXPECT_GE(t.busy_s, 0.0);
  EXPECT_LT(t.busy_s, 1.0);  // three 2 MB one-rank all-reduces
  EXPECT_GE(t.exposed_s, 0.0);
  const AllreduceTimes again = comm->take_allreduce_times();
  EXPECT_EQ(again.busy_s, 0.0);
  EXPECT_EQ(again.exposed_s, 0.0);
}

TEST_F(NcclCommunicator1Rank, BroadcastBytesFromRoot0KeepsEveryByte) {
  SCOPED_TRACE(seed_text());
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<uint8_t> want(kOddCount);
  for (auto& b : want) b = static_cast<uint8_t>(byte(rng));
  Buffer<uint8_t> bytes(*gpu, kOddCount);
  bytes.upload(want);
  comm->broadcast_bytes(bytes.data(), kOddCount, /*root=*/0);
  std::vector<uint8_t> got(kOddCount, 0xA5);
  gpu->copy_to_host(got.data(), bytes.data(), kOddCount);
  EXPECT_EQ(first_mismatch(got, want, [](uint8_t b) { return b; }), -1);
}

// comm_stream must wait for what compute_stream queued before the call: the
// values land on compute_stream 100 ms late, and a copy queued on comm_stream
// after the collective must still see them, not the poison.
TEST_F(NcclCommunicator1Rank, CollectiveWaitsForComputeStream) {
  SCOPED_TRACE(seed_text());
  const std::vector<lowp16> want = test::random_halves(rng, kOddCount);
  Buffer<lowp16> source_lowp(*gpu, kOddCount), data_lowp(*gpu, kOddCount);
  source_lowp.upload(want);
  for (const Collective& collective : kCollectives) {
    SCOPED_TRACE(collective.name);
    data_lowp.upload(test::poison_halves(kOddCount));
    DDP_CUDA_CHECK(cudaLaunchHostFunc(gpu->compute_stream(), hold_stream_100ms, nullptr));
    gpu->copy_on_device(data_lowp.data(), source_lowp.data(), data_lowp.size_bytes());
    collective.run(*comm, data_lowp.data(), kOddCount);
    std::vector<lowp16> got = test::poison_halves(kOddCount);
    DDP_CUDA_CHECK(cudaMemcpyAsync(got.data(), data_lowp.data(), data_lowp.size_bytes(), cudaMemcpyDeviceToHost,
                                   comm->comm_stream()));
    DDP_CUDA_CHECK(cudaStreamSynchronize(comm->comm_stream()));
    EXPECT_EQ(first_mismatch(got, want), -1);
    gpu->synchronize();
  }
}

// compute_stream must wait for the collective: comm_stream writes the values
// 100 ms late before it, and the backend's download (on compute_stream) must
// see them.
TEST_F(NcclCommunicator1Rank, ComputeStreamWaitsForCollective) {
  SCOPED_TRACE(seed_text());
  const std::vector<lowp16> want = test::random_halves(rng, kOddCount);
  Buffer<lowp16> source_lowp(*gpu, kOddCount), data_lowp(*gpu, kOddCount);
  source_lowp.upload(want);
  for (const Collective& collective : kCollectives) {
    SCOPED_TRACE(collective.name);
    data_lowp.upload(test::poison_halves(kOddCount));
    DDP_CUDA_CHECK(cudaLaunchHostFunc(comm->comm_stream(), hold_stream_100ms, nullptr));
    DDP_CUDA_CHECK(cudaMemcpyAsync(data_lowp.data(), source_lowp.data(), data_lowp.size_bytes(),
                                   cudaMemcpyDeviceToDevice, comm->comm_stream()));
    collective.run(*comm, data_lowp.data(), kOddCount);
    std::vector<lowp16> got = test::poison_halves(kOddCount);
    gpu->copy_to_host(got.data(), data_lowp.data(), data_lowp.size_bytes());
    EXPECT_EQ(first_mismatch(got, want), -1);
    comm->barrier();
  }
}

TEST_F(NcclCommunicator1Rank, HostSumOfOneRankIsIdentityAndBarrierReturns) {
  EXPECT_EQ(comm->allreduce_sum_host(3.25), 3.25);
  EXPECT_EQ(comm->allreduce_max_host(15), 15);
  EXPECT_NO_THROW(comm->barrier());
}

TEST_F(NcclCommunicator1Rank, ZeroSizedCollectivesAreNoOps) {
  EXPECT_NO_THROW(comm->allreduce_sum_lowp(nullptr, 0));
  EXPECT_NO_THROW(comm->broadcast_bytes(nullptr, 0, 0));
  EXPECT_NO_THROW(comm->barrier());
}

TEST_F(NcclCommunicator1Rank, BroadcastFromARootOutsideTheWorldThrows) {
  Buffer<uint8_t> bytes(*gpu, 16);
  EXPECT_THROW(comm->broadcast_bytes(bytes.data(), 16, /*root=*/1), Error);
  EXPECT_THROW(comm->broadcast_bytes(bytes.data(), 16, /*root=*/-1), Error);
}

// What the watchdog relies on: abort ends the communicator once, later
// collectives say so instead of touching a freed handle, and the destructor
// does not free it again.
TEST_F(NcclCommunicator1Rank, AbortIsIdempotentAndLaterCollectivesThrow) {
  Buffer<lowp16> grads_lowp(*gpu, 8);
  comm->abort();
  comm->abort();
  EXPECT_THROW(comm->allreduce_sum_lowp(grads_lowp.data(), 8), Error);
  EXPECT_THROW(comm->broadcast_bytes(grads_lowp.data(), 16, 0), Error);
  EXPECT_NO_THROW(comm.reset());
}

// The watchdog's abort lands while this thread issues collectives. The gate
// (comm/abort_gate.h) keeps it out of every NCCL call, so the communicator
// is never freed under one: the thread's next collective throws the one
// error, and nothing crashes in NCCL.
TEST_F(NcclCommunicator1Rank, AbortFromAnotherThreadAmidCollectivesEndsInTheError) {
  const size_t n = 4096;
  Buffer<lowp16> grads_lowp(*gpu, n);
  grads_lowp.upload(test::random_halves(rng, n));
  std::atomic<bool> started{false};
  std::thread watchdog([&] {
    while (!started.load()) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    comm->abort();
  });
  std::string error;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  try {
    while (std::chrono::steady_clock::now() < give_up) {
      comm->allreduce_sum_lowp(grads_lowp.data(), n);
      started = true;
    }
  } catch (const Error& e) {
    error = e.what();
  }
  started = true;  // in case the first collective threw
  watchdog.join();
  EXPECT_EQ(error, "allreduce_sum_lowp on an aborted NCCL communicator");
}

// Argument checks come before any CUDA or NCCL call, so these need no GPU.
TEST(NcclCommunicatorArgs, RankOutsideTheWorldThrows) {
  EXPECT_THROW(NcclCommunicator(1, 1, nullptr), Error);
  EXPECT_THROW(NcclCommunicator(-1, 2, nullptr), Error);
  EXPECT_THROW(NcclCommunicator(0, 0, nullptr), Error);
}

// This process is not an MPI job of two (MPI uninitialised, a singleton, or
// no MPI in the build), so a world of two cannot share the id and must say so
// rather than wait for a peer.
TEST(NcclCommunicatorArgs, WorldOfTwoOutsideAnMpiJobOfTwoThrows) {
  EXPECT_THROW(NcclCommunicator(0, 2, nullptr), Error);
}

}  // namespace
}  // namespace ddp
