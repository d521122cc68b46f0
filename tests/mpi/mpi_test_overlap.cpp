// mpi_test_overlap.cpp: communication really overlaps computation on CPU
// ranks. The communicator's thread makes progress on a started all-reduce
// while the caller computes, and the trainer starts bucket all-reduces from
// inside backward (while backward GEMMs remain), then waits once.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "comm/mpi_communicator.h"
#include "trainer/loop/trainer.h"
#include "mpi/mpi_test_support.h"
#include "support/recording_backend.h"

namespace ddp {
namespace {
using test::failures_anywhere;

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// A started all-reduce of 16 MB completes while the caller sleeps for three
// times its synchronous duration: waiting afterwards takes well under half
// of it. Without a communication thread the wait would take the whole time.
TEST(MpiOverlap, StartedAllreduceProgressesWhileTheCallerComputes) {
  MpiCommunicator comm;
  std::vector<lowp16> data(8u << 20, to_half(1.0f));
  comm.barrier();
  double t = now_s();
  comm.allreduce_sum_lowp(data.data(), data.size());
  double sync_s = now_s() - t;
  MPI_Allreduce(MPI_IN_PLACE, &sync_s, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);

  std::fill(data.begin(), data.end(), to_half(1.0f));
  comm.barrier();
  t = now_s();
  comm.start_allreduce_sum_lowp(data.data(), data.size());
  const double start_s = now_s() - t;  // returns at once: the thread does the work
  std::this_thread::sleep_for(std::chrono::duration<double>(3 * sync_s + 0.05));
  t = now_s();
  comm.wait_allreduces();
  const double wait_s = now_s() - t;
  // (start_s is only reported: on a loaded machine a descheduled caller can
  // make even a queue push look slow; a start that did the work itself
  // fails the hidden-fraction check below.)
  int bad = !(wait_s < 0.5 * sync_s);
  bad += half_to_float(data[12345]) != static_cast<float>(comm.world_size());
  const AllreduceTimes times = comm.take_allreduce_times();
  bad += !(times.hidden_fraction() > 0.0);  // the second sum was (mostly) hidden
  EXPECT_EQ(failures_anywhere(bad), 0) << "sync " << sync_s << " s, start " << start_s << " s, wait after overlap "
                                       << wait_s << " s";
}

// Where backward is, counted in the GEMMs the backend was asked for: the
// loss gradient (mse_backward) opens a micro-batch's backward, and every
// GEMM after it, until the next forward, is backward work.
struct BackwardProgress {
  int gemms = 0;                   // gemm_lowp calls issued so far
  int gemms_at_loss_gradient = 0;  // ... when the latest loss gradient was issued
  void note(const char* operation) {
    if (std::strcmp(operation, "gemm_lowp") == 0) ++gemms;
    if (std::strcmp(operation, "mse_backward") == 0) gemms_at_loss_gradient = gemms;
  }
  int backward_gemms_issued() const { return gemms - gemms_at_loss_gradient; }
};

// Records what the trainer asks of the communicator, bucket starts ('S') and
// waits ('W'), each with how many of the current micro-batch's backward
// GEMMs had been issued at that moment.
class RecordingCommunicator final : public Communicator {
 public:
  RecordingCommunicator(Communicator& inner, const BackwardProgress& progress) : inner_(inner), progress_(progress) {}
  int rank() const override { return inner_.rank(); }
  int world_size() const override { return inner_.world_size(); }
  std::string name() const override { return "recording " + inner_.name(); }
  void allreduce_sum_lowp(lowp16* d, size_t n) override { inner_.allreduce_sum_lowp(d, n); }
  void start_allreduce_sum_lowp(lowp16* d, size_t n) override {
    note('S');
    inner_.start_allreduce_sum_lowp(d, n);
  }
  void wait_allreduces() override {
    note('W');
    inner_.wait_allreduces();
  }
  void broadcast_bytes(void* d, size_t n, int root) override { inner_.broadcast_bytes(d, n, root); }
  double allreduce_sum_host(double v) override { return inner_.allreduce_sum_host(v); }
  int64_t allreduce_max_host(int64_t v) override { return inner_.allreduce_max_host(v); }
  void allreduce_max_int32(int32_t* d, size_t n) override { inner_.allreduce_max_int32(d, n); }
  void reduce_scatter_sum_lowp(const lowp16* s, lowp16* r, const ShardLayout& l) override {
    inner_.reduce_scatter_sum_lowp(s, r, l);
  }
  void allgather_lowp(const lowp16* m, lowp16* f, const ShardLayout& l) override { inner_.allgather_lowp(m, f, l); }
  void barrier() override { inner_.barrier(); }
  AllreduceTimes take_allreduce_times() override { return inner_.take_allreduce_times(); }
  void clear() {
    events.clear();
    backward_gemms_issued.clear();
  }
  std::string events;                      // 'S' and 'W', in call order
  std::vector<int> backward_gemms_issued;  // per event

 private:
  void note(char kind) {
    events += kind;
    backward_gemms_issued.push_back(progress_.backward_gemms_issued());
  }
  Communicator& inner_;
  const BackwardProgress& progress_;
};

// Four layers and buckets of one tensor each (a weight, then its bias):
// per step, eight starts come from inside backward, then one wait; with
// --grad-accum 2 the first micro-batch starts nothing (no_sync). Each start
// is checked for backward work still to come: the first three layers'
// buckets start while lower layers' GEMMs remain (a trainer that started
// them after backward, in the same order, fails here), a layer's weight and
// bias together (one GEMM writes both), the work left shrinking from one
// layer's starts to the next's.
// Ranks stay identical (that the run learns is MpiTraining's to check).
TEST(MpiOverlap, TrainerStartsBucketsInsideBackward) {
  MpiCommunicator mpi;
  BackwardProgress progress;
  RecordingCommunicator comm(mpi, progress);
  TrainConfig c;
  c.data.kind = "synthetic";
  c.mlp.layer_widths = {10, 64, 64, 64, 10};
  c.loss = LossKind::MeanSquaredError;
  c.loss_name = "mse";
  c.batch_size = 16;
  c.grad_accum = 2;
  c.steps = 12;
  c.log_every = 1000;
  c.bucket_mb = 1e-6;
  c.first_bucket_mb = 1e-6;  // every layer its own bucket
  c.data.synthetic_train_samples = 640;
  c.data.synthetic_test_samples = 64;
  RecordingBackend cpu(DeviceKind::Cpu, /*can_capture=*/false);
  cpu.on_operation = [&progress](const char* operation) { progress.note(operation); };
  Trainer t(c, cpu, comm, load_train_test(c.data, 3));
  t.prepare();
  comm.clear();
  t.run();
  const int layers = static_cast<int>(c.mlp.layer_widths.size()) - 1;
  // The model's backward: a dW GEMM per layer, a dX GEMM for all but the first.
  const int backward_gemms = 2 * layers - 1;
  const int buckets = 2 * layers;
  const std::string per_step = std::string(static_cast<size_t>(buckets), 'S') + "W";
  int bad = 0;
  std::string remaining_text;  // backward GEMMs left at each start, per step
  for (int s = 0; s < 12; ++s) {
    const size_t first = static_cast<size_t>(s) * per_step.size();
    if (comm.events.size() < first + per_step.size() || comm.events.compare(first, per_step.size(), per_step) != 0) {
      ++bad;
      break;
    }
    // The wait comes after the whole backward: it saw every backward GEMM.
    bad += comm.backward_gemms_issued[first + per_step.size() - 1] != backward_gemms;
    int left_before = backward_gemms + 1;
    for (int b = 0; b < buckets; ++b) {
      const int left = backward_gemms - comm.backward_gemms_issued[first + static_cast<size_t>(b)];
      remaining_text += std::to_string(left) + (b + 1 < buckets ? "," : " ");
      const bool bias = b % 2 == 1;                             // follows its layer's weight
      bad += b + 2 < buckets && left <= 0;                      // only the first layer's buckets may start at the end
      bad += bias ? left != left_before : left >= left_before;  // each layer later in backward than the one before
      left_before = left;
    }
  }
  std::vector<float> mine = t.snapshot().master_weights_fp32, root = mine;
  mpi.broadcast_bytes(root.data(), root.size() * sizeof(float), 0);
  bad += mine != root;
  EXPECT_EQ(failures_anywhere(bad), 0) << comm.events.substr(0, 60) << "; backward GEMMs left at each start, of "
                                       << backward_gemms << " per step: " << remaining_text;
}

}  // namespace
}  // namespace ddp
