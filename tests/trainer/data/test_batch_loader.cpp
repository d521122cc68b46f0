// test_batch_loader.cpp: the batch loader's one-batch-ahead logic on the CPU
// backend (whose upload slots copy synchronously, in call order), and the
// trainer's use of it: the batches a run consumes are the sampler's, in
// order, with and without prefetching, across epoch ends, with
// gradient accumulation, a short last batch, --drop-last and a resume; and
// every prefetch but the run's first batch is a hit. The CUDA side (pinned
// staging, copy stream, events) is tested in cuda_test_upload_slots.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "kernels/cpu/cpu_backend.h"
#include "trainer/data/batch_loader.h"
#include "trainer/loop/trainer.h"
#include "support/temp_dir.h"
#include "support/sampler_batches.h"
#include "support/test_support.h"

namespace ddp {
namespace {
namespace fs = std::filesystem;

using Indices = std::vector<uint32_t>;

Dataset random_dataset(std::mt19937_64& rng, size_t count, size_t features, bool classification) {
  Dataset d;
  d.count = count;
  d.features = features;
  d.x = test::random_floats(rng, count * features);
  if (classification) {
    d.num_classes = 7;
    d.labels = test::random_labels(rng, count, d.num_classes);
  } else {
    d.target_dim = 3;
    d.targets = test::random_floats(rng, count * d.target_dim);
  }
  return d;
}

Indices random_indices(std::mt19937_64& rng, size_t count, int rows) {
  Indices idx(rows);
  for (auto& i : idx) i = static_cast<uint32_t>(rng() % count);
  return idx;
}

// The batch's device contents equal the data set's rows `idx`.
void expect_batch_holds(Backend& backend, const Dataset& d, const DeviceBatch& b, const Indices& idx) {
  ASSERT_EQ(b.rows, static_cast<int>(idx.size()));
  EXPECT_EQ(b.token_ids, nullptr);  // feature data: one label a row, no token ids
  EXPECT_EQ(b.labels_per_row, 1);
  const size_t n = idx.size(), f = d.features;
  std::vector<lowp16> features(n * f);
  backend.copy_to_host(features.data(), b.features_lowp, features.size() * sizeof(lowp16));
  for (size_t r = 0; r < n; ++r)
    for (size_t c = 0; c < f; ++c)
      ASSERT_EQ(features[r * f + c].bits, to_half(d.x[idx[r] * f + c]).bits) << "row " << r << " col " << c;
  if (d.is_classification()) {
    std::vector<int32_t> labels(n);
    backend.copy_to_host(labels.data(), b.labels, n * sizeof(int32_t));
    for (size_t r = 0; r < n; ++r) ASSERT_EQ(labels[r], d.labels[idx[r]]) << "row " << r;
  } else {
    const size_t k = d.target_dim;
    std::vector<float> targets(n * k);
    backend.copy_to_host(targets.data(), b.targets_fp32, targets.size() * sizeof(float));
    for (size_t i = 0; i < n * k; ++i) ASSERT_EQ(targets[i], d.targets[idx[i / k] * k + i % k]) << "element " << i;
  }
}

TEST(BatchLoader, EveryLoadHoldsTheRowsAskedFor) {
  // Random sequences of prefetches (of the next batch, of other rows, none,
  // two in a row) and loads (short batches, repeats): whatever was
  // prefetched, a load returns exactly its rows.
  std::mt19937_64 rng(test::test_seed());
  CpuBackend cpu(1);
  for (bool classification : {true, false}) {
    SCOPED_TRACE(classification ? "classification" : "regression");
    const Dataset d = random_dataset(rng, 50, 6, classification);
    BatchLoader loader(cpu, d, 8);
    Indices next = random_indices(rng, d.count, 8);
    for (int i = 0; i < 300; ++i) {
      const Indices batch = next;
      const int rows = 1 + static_cast<int>(rng() % 8);
      switch (rng() % 5) {
        case 0:
          next = batch;
          break;  // the same batch again (resident)
        default:
          next = random_indices(rng, d.count, rows);
          break;
      }
      const DeviceBatch b = loader.load(batch.data(), static_cast<int>(batch.size()));
      expect_batch_holds(cpu, d, b, batch);
      switch (rng() % 4) {
        case 0:
          break;   // no prefetch
        case 1: {  // a wrong guess
          const Indices wrong = random_indices(rng, d.count, rows);
          loader.prefetch(wrong.data(), rows);
          break;
        }
        case 2: {  // a wrong guess replaced by the right one
          const Indices wrong = random_indices(rng, d.count, rows);
          loader.prefetch(wrong.data(), rows);
          loader.prefetch(next.data(), static_cast<int>(next.size()));
          break;
        }
        default:
          loader.prefetch(next.data(), static_cast<int>(next.size()));
          break;
      }
      // A prefetch never disturbs the batch in use.
      expect_batch_holds(cpu, d, b, batch);
      if (HasFatalFailure()) return;
    }
  }
}

TEST(BatchLoader, PrefetchedBatchIsNotCopiedAgain) {
  std::mt19937_64 rng(test::test_seed());
  CpuBackend cpu(1);
  const Dataset d = random_dataset(rng, 40, 5, true);
  BatchLoader loader(cpu, d, 4);
  const Indices a = {1, 2, 3, 4}, b = {5, 6, 7}, c = {8, 9, 10, 11};
  loader.load(a.data(), 4);  // nothing prefetched: on demand
  loader.prefetch(b.data(), 3);
  expect_batch_holds(cpu, d, loader.load(b.data(), 3), b);
  loader.prefetch(c.data(), 4);
  expect_batch_holds(cpu, d, loader.load(c.data(), 4), c);
  EXPECT_EQ(loader.counts().loads, 3);
  EXPECT_EQ(loader.counts().copies, 3);
  EXPECT_EQ(loader.counts().loaded_on_demand, 1);
  // A prefix of the prefetched rows is another batch: copied on demand.
  loader.prefetch(a.data(), 4);
  expect_batch_holds(cpu, d, loader.load(a.data(), 3), Indices(a.begin(), a.begin() + 3));
  EXPECT_EQ(loader.counts().loaded_on_demand, 2);
}

TEST(BatchLoader, ResidentBatchIsNotCopiedAgain) {
  // --bench trains on one resident batch: asked for the rows a slot holds,
  // the loader copies nothing, prefetched or not.
  std::mt19937_64 rng(test::test_seed());
  CpuBackend cpu(1);
  const Dataset d = random_dataset(rng, 16, 5, false);
  BatchLoader loader(cpu, d, 16);
  Indices all(16);
  for (uint32_t i = 0; i < 16; ++i) all[i] = i;
  for (int step = 0; step < 5; ++step) {
    expect_batch_holds(cpu, d, loader.load(all.data(), 16), all);
    loader.prefetch(all.data(), 16);
  }
  EXPECT_EQ(loader.counts().copies, 1);
  EXPECT_EQ(loader.counts().loaded_on_demand, 1);
}

TEST(BatchLoader, TwoSlotsAtFixedAddresses) {
  // Consecutive batches alternate between two slots whose addresses never
  // change (steady-state training allocates nothing).
  std::mt19937_64 rng(test::test_seed());
  CpuBackend cpu(1);
  const Dataset d = random_dataset(rng, 64, 5, true);
  BatchLoader loader(cpu, d, 8);
  std::set<const lowp16*> feature_addresses;
  std::set<const int32_t*> label_addresses;
  const lowp16* previous = nullptr;
  for (int i = 0; i < 20; ++i) {
    const Indices batch = random_indices(rng, d.count, 8), next = random_indices(rng, d.count, 8);
    const DeviceBatch b = loader.load(batch.data(), 8);
    if (i % 2) loader.prefetch(next.data(), 8);
    EXPECT_NE(b.features_lowp, previous) << "batch " << i << " reused the slot of the batch before it";
    previous = b.features_lowp;
    feature_addresses.insert(b.features_lowp);
    label_addresses.insert(b.labels);
  }
  EXPECT_EQ(feature_addresses.size(), 2u);
  EXPECT_EQ(label_addresses.size(), 2u);
}

// ---- the trainer's batches -----------------------------------------------------

TrainConfig small_config() {
  TrainConfig c;
  c.data.kind = "synthetic";
  c.mlp.layer_widths = {10, 16, 10};
  c.loss = LossKind::MeanSquaredError;
  c.loss_name = "mse";
  // 37 samples in micro-batches of 4, 2 per step: 5 steps per epoch, the
  // last of 5 rows (micro-batches of 4 and 1); 4 steps with --drop-last.
  c.data.synthetic_train_samples = 37;
  c.data.synthetic_test_samples = 20;
  c.batch_size = 4;
  c.grad_accum = 2;
  c.lr = 0.05;
  c.momentum = 0.9;
  c.log_every = 1000;
  c.steps = 13;  // into the third epoch
  return c;
}

// The micro-batches of `steps` steps from the start, straight from the
// sampler (one rank).
std::vector<Indices> expected_batches(const TrainConfig& c, int64_t steps) {
  return test::sampler_batches(static_cast<size_t>(c.data.synthetic_train_samples), 0, 1, c.seed, c.shuffle,
                               c.drop_last, c.batch_size, c.grad_accum, steps);
}

struct RecordedRun {
  std::vector<Indices> batches;
  BatchLoaderCounts counts;
  std::vector<float> master_weights;
};

RecordedRun train_recording(const TrainConfig& c) {
  CpuBackend cpu(1);
  SingleProcessCommunicator comm;
  Trainer t(c, cpu, comm, load_train_test(c.data, c.seed));
  RecordedRun run;
  t.observe_batches([&run](const uint32_t* indices, int rows) { run.batches.emplace_back(indices, indices + rows); });
  t.prepare();
  t.run();
  run.counts = t.loader_counts();
  run.master_weights = t.snapshot().master_weights_fp32;
  return run;
}

void expect_same_weights(const std::vector<float>& a, const std::vector<float>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << "parameter " << i;
}

TEST(TrainingPrefetch, BatchesAreTheSamplersWithAndWithoutPrefetch) {
  // 37 samples: an epoch's last step has micro-batches of 4 and 1 rows; 35:
  // one micro-batch of 3. With --drop-last both have 4 full steps an epoch.
  for (int64_t samples : {37, 35})
    for (bool drop_last : {false, true}) {
      SCOPED_TRACE(std::to_string(samples) + " samples" + (drop_last ? ", --drop-last" : ""));
      TrainConfig c = small_config();
      c.data.synthetic_train_samples = samples;
      c.drop_last = drop_last;
      const std::vector<Indices> want = expected_batches(c, c.steps);
      ASSERT_EQ(want.size(), drop_last || samples == 37 ? 26u : 24u);
      const bool has_short = std::any_of(want.begin(), want.end(), [](const Indices& b) { return b.size() < 4; });
      ASSERT_EQ(has_short, !drop_last);

      const RecordedRun ahead = train_recording(c);
      EXPECT_EQ(ahead.batches, want);
      EXPECT_EQ(ahead.counts.loads, static_cast<int64_t>(want.size()));
      // Only the run's first batch is gathered on demand: every later one
      // was prefetched right, across epoch ends too.
      EXPECT_EQ(ahead.counts.loaded_on_demand, 1);

      c.prefetch_batches = false;
      const RecordedRun on_demand = train_recording(c);
      EXPECT_EQ(on_demand.batches, want);
      EXPECT_EQ(on_demand.counts.loaded_on_demand, static_cast<int64_t>(want.size()));
      expect_same_weights(ahead.master_weights, on_demand.master_weights);
    }
}

TEST(TrainingPrefetch, ResumeContinuesWithTheSamplersBatches) {
  const test::TempDir temp_dir("prefetch_resume");
  const std::string& dir = temp_dir.path();
  TrainConfig c = small_config();
  const RecordedRun straight = train_recording(c);

  TrainConfig first = c;
  first.checkpoint_dir = dir;
  first.stop_after_steps = 7;  // stops mid-epoch 2
  const RecordedRun a = train_recording(first);
  TrainConfig second = c;
  second.checkpoint_dir = dir;
  second.resume = true;
  const RecordedRun b = train_recording(second);

  std::vector<Indices> both = a.batches;
  both.insert(both.end(), b.batches.begin(), b.batches.end());
  EXPECT_EQ(both, expected_batches(c, c.steps));
  EXPECT_EQ(a.counts.loaded_on_demand, 1);
  EXPECT_EQ(b.counts.loaded_on_demand, 1);  // the resumed run's first batch, then prefetched from the epoch offset
  expect_same_weights(b.master_weights, straight.master_weights);
}

}  // namespace
}  // namespace ddp
