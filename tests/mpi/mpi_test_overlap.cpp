// mpi_test_overlap.cpp: communication really overlaps computation on CPU
// ranks. The communicator's thread makes progress on a started all-reduce
// while the caller computes, and the trainer starts bucket all-reduces from
// inside backward (before it ends), then waits once.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "comm/mpi_communicator.h"
#include "kernels/cpu_backend.h"
#include "trainer/trainer.h"
#include "mpi/mpi_test_support.h"

namespace ddp {
namespace {
using test::failures_anywhere;

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// A started all-reduce of 16 MB completes while the caller sleeps for three
// times its synchronous duration: waiting afterwards takes well under half
// of it. Without a communication thread the wait would take the whole time.
TEST(MpiOverlap, StartedAllreduceProgressesWhileTheCallerComputes) {
  MpiCommunicator comm;
  std::vector<half16> data(8u << 20, to_half(1.0f));
  comm.barrier();
  double t = now_s();
  comm.allreduce_sum_fp16(data.data(), data.size());
  double sync_s = now_s() - t;
  MPI_Allreduce(MPI_IN_PLACE, &sync_s, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);

  std::fill(data.begin(), data.end(), to_half(1.0f));
  comm.barrier();
  t = now_s();
  comm.start_allreduce_sum_fp16(data.data(), data.size());
  const double start_s = now_s() - t;  // returns at once: the thread does the work
  std::this_thread::sleep_for(std::chrono::duration<double>(3 * sync_s + 0.05));
  t = now_s();
  comm.wait_allreduces();
  const double wait_s = now_s() - t;
  // (start_s is only reported: on a loaded machine a descheduled caller can
  // make even a queue push look slow; a start that did the work itself
  // fails the hidden-fraction check below.)
  int bad = !(wait_s < 0.5 * sync_s);
  bad += to_float(data[12345]) != static_cast<float>(comm.world_size());
  const AllreduceTimes times = comm.take_allreduce_times();
  bad += !(times.hidden_fraction() > 0.0);  // the second sum was (mostly) hidden
  EXPECT_EQ(failures_anywhere(bad), 0) << "sync " << sync_s << " s, start " << start_s << " s, wait after overlap " << wait_s
                                       << " s";
}

// Records what the trainer asks of the communicator: bucket starts and waits.
class RecordingCommunicator final : public Communicator {
 public:
  explicit RecordingCommunicator(Communicator& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int world_size() const override { return inner_.world_size(); }
  std::string name() const override { return "recording " + inner_.name(); }
  void allreduce_sum_fp16(half16* d, size_t n) override { inner_.allreduce_sum_fp16(d, n); }
  void start_allreduce_sum_fp16(half16* d, size_t n) override {
    events += 'S';
    inner_.start_allreduce_sum_fp16(d, n);
  }
  void wait_allreduces() override {
    events += 'W';
    inner_.wait_allreduces();
  }
  void broadcast_bytes(void* d, size_t n, int root) override { inner_.broadcast_bytes(d, n, root); }
  double allreduce_sum_host(double v) override { return inner_.allreduce_sum_host(v); }
  int64_t allreduce_max_host(int64_t v) override { return inner_.allreduce_max_host(v); }
  void barrier() override { inner_.barrier(); }
  AllreduceTimes take_allreduce_times() override { return inner_.take_allreduce_times(); }
  std::string events;

 private:
  Communicator& inner_;
};

// Four layers and buckets of about one layer: per step, four starts come
// from inside backward (three of them while layers below still have to be
// computed), then one wait; with --grad-accum 2 the first micro-batch starts
// nothing (no_sync). The run still learns and ranks stay identical.
TEST(MpiOverlap, TrainerStartsBucketsInsideBackward) {
  MpiCommunicator mpi;
  RecordingCommunicator comm(mpi);
  TrainConfig c;
  c.data.kind = "synthetic";
  c.layer_widths = {10, 64, 64, 64, 10};
  c.loss = LossKind::MeanSquaredError, c.loss_name = "mse";
  c.batch_size = 16, c.grad_accum = 2, c.steps = 12, c.log_every = 1000;
  c.bucket_mb = 1e-6, c.first_bucket_mb = 1e-6;  // every layer its own bucket
  c.data.synthetic_train_samples = 640, c.data.synthetic_test_samples = 64;
  CpuBackend cpu(1);
  Trainer t(c, cpu, comm, load_train_test(c.data, 3));
  t.prepare();
  comm.events.clear();
  t.run();
  std::string per_step;
  for (int s = 0; s < 12; ++s) per_step += "SSSSW";
  int bad = comm.events.substr(0, per_step.size()) != per_step;
  std::vector<float> mine = t.snapshot().master_weights_fp32, root = mine;
  mpi.broadcast_bytes(root.data(), root.size() * sizeof(float), 0);
  bad += mine != root;
  EXPECT_EQ(failures_anywhere(bad), 0) << comm.events.substr(0, 60);
}

}  // namespace
}  // namespace ddp
