// test_cuda_graph_refusal.cpp: --cuda-graph over a transport that cannot be
// captured is refused when the Trainer is built, in one line that carries
// the transport's own reason (an NCCL older than 2.9 says its version and
// what it needs), before any step runs. The backend is RecordingBackend
// claiming capture, so the transport is the only thing missing.
#include <gtest/gtest.h>

#include <string>

#include "comm/communicator.h"
#include "support/recording_backend.h"
#include "trainer/data/data_source.h"
#include "trainer/loop/trainer.h"

namespace ddp {
namespace {

// A world of one that cannot be captured, saying why as `reason` (empty:
// the Communicator's default reason).
class UncapturableCommunicator final : public Communicator {
 public:
  UncapturableCommunicator(std::string name, std::string reason) : name_(std::move(name)), reason_(std::move(reason)) {}
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string name() const override { return name_; }
  void allreduce_sum_lowp(lowp16*, size_t) override {}
  void broadcast_bytes(void*, size_t, int) override {}
  double allreduce_sum_host(double value) override { return value; }
  int64_t allreduce_max_host(int64_t value) override { return value; }
  void allreduce_max_int32(int32_t*, size_t) override {}
  void reduce_scatter_sum_lowp(const lowp16* send, lowp16* recv, const ShardLayout& layout) override {
    alone_.reduce_scatter_sum_lowp(send, recv, layout);
  }
  void allgather_lowp(const lowp16* mine, lowp16* full, const ShardLayout& layout) override {
    alone_.allgather_lowp(mine, full, layout);
  }
  void barrier() override {}
  std::string capture_unsupported_reason() const override {
    return reason_.empty() ? Communicator::capture_unsupported_reason() : reason_;
  }

 private:
  std::string name_, reason_;
  SingleProcessCommunicator alone_;  // a world of one's (host) copies
};

TrainConfig graph_config() {
  TrainConfig c;
  c.data.kind = "synthetic";
  c.mlp.layer_widths = {10, 16, 10};
  c.loss = LossKind::MeanSquaredError;
  c.loss_name = "mse";
  c.batch_size = 16;
  c.data.synthetic_train_samples = 64;
  c.data.synthetic_test_samples = 16;
  c.cuda_graph = true;
  return c;
}

std::string refusal(Communicator& comm) {
  const TrainConfig c = graph_config();
  RecordingBackend capturing(DeviceKind::Cuda, /*can_capture=*/true);
  try {
    Trainer t(c, capturing, comm, load_train_test(c.data, c.seed));
  } catch (const Error& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(CudaGraphRefusal, TheTransportsReasonIsTheMessage) {
  const std::string reason =
      "NCCL 2.8.4 cannot capture its collectives in a CUDA graph (that needs NCCL >= 2.9.0); use a newer NCCL or "
      "run without --cuda-graph";
  UncapturableCommunicator old_nccl("NCCL 2.8.4", reason);
  EXPECT_EQ(refusal(old_nccl), "--cuda-graph: " + reason);
}

TEST(CudaGraphRefusal, AHostTransportNamesItself) {
  UncapturableCommunicator mpi("MPI", "");
  EXPECT_EQ(refusal(mpi), "--cuda-graph: the MPI transport cannot be captured in a CUDA graph");
}

}  // namespace
}  // namespace ddp
