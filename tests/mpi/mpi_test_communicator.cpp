// mpi_test_communicator.cpp: the MPI communicator against closed-form values
// (nccl-tests style: every rank can compute the expected result itself), and
// a data-parallel training run whose ranks must end bitwise identical.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>

#include "comm/mpi_communicator.h"
#include "kernels/cpu/cpu_backend.h"
#include "trainer/loop/trainer.h"
#include "mpi/mpi_test_support.h"

namespace ddp {
namespace {
using test::failures_anywhere;

TEST(MpiCommunicator, Fp16SumIsExactOnSmallIntegers) {
  MpiCommunicator comm;
  const int r = comm.rank(), n = comm.world_size();
  const size_t count = 100003;  // odd size, more than one MPI message segment
  std::vector<lowp16> data(count);
  // Element i on rank r: (i % 61) + r, all sums < 2048 so FP16 holds them exactly.
  for (size_t i = 0; i < count; ++i) data[i] = to_half(static_cast<float>(i % 61 + r));
  comm.allreduce_sum_lowp(data.data(), count);
  int bad = 0;
  for (size_t i = 0; i < count; ++i) {
    const float want = static_cast<float>(n * (i % 61) + n * (n - 1) / 2);
    bad += half_to_float(data[i]) != want;
  }
  EXPECT_EQ(failures_anywhere(bad), 0);
}

TEST(MpiCommunicator, Fp16SumRoundsLikeNcclAndPropagatesInf) {
  MpiCommunicator comm;
  std::vector<lowp16> data = {to_half(1.0f), to_half(60000.0f), to_half(0.0f), to_half(2.0f)};
  if (comm.rank() == comm.world_size() - 1) data[2].bits = 0x7c00;  // +Inf on one rank
  if (comm.rank() == 0) data[3].bits = 0x7e00;                      // NaN on another
  comm.allreduce_sum_lowp(data.data(), data.size());
  int bad = 0;
  bad += half_to_float(data[0]) != static_cast<float>(comm.world_size());
  bad += comm.world_size() > 1 && data[1].bits != 0x7c00;  // 2 x 60000 overflows FP16 to Inf
  bad += data[2].bits != 0x7c00;
  bad += !std::isnan(half_to_float(data[3]));
  EXPECT_EQ(failures_anywhere(bad), 0);
}

// The BF16 twins (--precision bf16's all-reduce, comm/sum16.h's BF16 sum):
// BF16 holds integers exactly up to 256.
TEST(MpiCommunicator, Bf16SumIsExactOnSmallIntegers) {
  MpiCommunicator comm(MPI_COMM_WORLD, 0, Precision::Bf16);
  ASSERT_EQ(comm.precision(), Precision::Bf16);
  const int r = comm.rank(), n = comm.world_size();
  const size_t count = 100003;
  std::vector<lowp16> data(count);
  // Element i on rank r: (i % 29) + r, all sums <= 4 x 28 + 6 < 256.
  for (size_t i = 0; i < count; ++i) data[i] = to_bfloat16(static_cast<float>(i % 29 + r));
  comm.allreduce_sum_lowp(data.data(), count);
  int bad = 0;
  for (size_t i = 0; i < count; ++i) {
    const float want = static_cast<float>(n * (i % 29) + n * (n - 1) / 2);
    bad += bfloat16_to_float(data[i]) != want;
  }
  EXPECT_EQ(failures_anywhere(bad), 0);
}

TEST(MpiCommunicator, Bf16SumRoundsOnceAPairAndPropagatesInf) {
  MpiCommunicator comm(MPI_COMM_WORLD, 0, Precision::Bf16);
  const int n = comm.world_size();
  // 256 + 1 is a tie between 256 and 258: even, 256, at every pairwise step
  // (FP16 would hold 257, and FP16's bits read as BF16 are other numbers).
  std::vector<lowp16> data = {to_bfloat16(comm.rank() == 0 ? 256.0f : 1.0f), to_bfloat16(3e38f), to_bfloat16(0.0f),
                              to_bfloat16(2.0f)};
  if (comm.rank() == n - 1) data[2].bits = 0x7f80;  // +Inf on one rank
  if (comm.rank() == 0) data[3].bits = 0x7fc0;      // NaN on another
  comm.allreduce_sum_lowp(data.data(), data.size());
  int bad = 0;
  bad += n == 2 && bfloat16_to_float(data[0]) != 256.0f;
  bad += n > 1 && data[1].bits != 0x7f80;  // 2 x 3e38 overflows BF16 (and FP32) to Inf
  bad += data[2].bits != 0x7f80;
  bad += !std::isnan(bfloat16_to_float(data[3]));
  EXPECT_EQ(failures_anywhere(bad), 0);
}

TEST(MpiCommunicator, BroadcastAndScalarSum) {
  MpiCommunicator comm;
  std::vector<float> v(1000, static_cast<float>(comm.rank() + 7));
  comm.broadcast_bytes(v.data(), v.size() * sizeof(float), 0);
  int bad = 0;
  for (float x : v) bad += x != 7.0f;
  const double s = comm.allreduce_sum_host(comm.rank() + 1.0);
  bad += s != comm.world_size() * (comm.world_size() + 1) / 2.0;
  // The last rank holds the largest value, and a value above 2^53 must not go through a double.
  const int64_t big = (int64_t{1} << 60) + 1;
  bad += comm.allreduce_max_host(comm.rank() + 1 == comm.world_size() ? big : comm.rank()) != big;
  bad += comm.allreduce_max_host(comm.rank() == 0 ? 15 : 0) != 15;
  EXPECT_EQ(failures_anywhere(bad), 0);
}

TEST(MpiTraining, RanksStayIdenticalAndLearn) {
  MpiCommunicator comm;
  TrainConfig c;
  c.data.kind = "synthetic";
  c.mlp.layer_widths = {10, 16, 10};
  c.loss = LossKind::MeanSquaredError;
  c.loss_name = "mse";
  c.batch_size = 16;
  c.steps = 60;
  c.log_every = 1000;
  c.lr = 0.05;
  c.seed = 100 + comm.rank();  // different seeds: rank 0's initial weights must win
  c.data.synthetic_train_samples = 1000;
  c.data.synthetic_test_samples = 200;
  CpuBackend cpu(1);
  Trainer t(c, cpu, comm, load_train_test(c.data, 100));
  t.prepare();
  const TrainSummary s = t.run();
  std::vector<float> mine = t.snapshot().master_weights_fp32, root = mine;
  comm.broadcast_bytes(root.data(), root.size() * sizeof(float), 0);
  int bad = mine != root;
  bad += !(s.test_loss < 0.3);
  EXPECT_EQ(failures_anywhere(bad), 0) << "test loss " << s.test_loss;
}

}  // namespace
}  // namespace ddp
