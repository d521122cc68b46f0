// test_batch_loader_tokens.cpp: the batch loader on token data (a language
// model's windows of T token ids with one label per position) on the CPU
// backend, whose upload slots are the device memory itself and copy
// synchronously. Each case draws a fresh random data set; a batch's device
// token ids and labels must equal the host rows asked for, exactly, whatever
// was prefetched. The slot a fill is about to overwrite is poisoned first,
// and so is the host memory the device batch is read back into, so a row or
// position the gather forgot to write shows as the poison, not as a stale
// but plausible value. The CUDA side is in cuda_test_upload_slots.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "trainer/data/batch_loader.h"
#include "support/test_support.h"

namespace ddp {
namespace {

using Indices = std::vector<uint32_t>;

// Not a token id nor a label (negative), and not 0: a forgotten write shows.
constexpr int32_t kPoisonInt32 = static_cast<int32_t>(0xA5A5A5A5u);

Dataset random_token_dataset(std::mt19937_64& rng, size_t count) {
  Dataset d;
  d.count = count;
  d.tokens_per_sample = 2 + rng() % 11;  // T in [2, 12]
  d.vocab_size = static_cast<int>(5 + rng() % 300);
  d.num_classes = static_cast<int>(2 + rng() % 300);  // independent of the vocabulary, so a mix-up shows
  d.token_ids = test::random_labels(rng, count * d.tokens_per_sample, d.vocab_size);
  d.labels = test::random_labels(rng, count * d.tokens_per_sample, d.num_classes);
  d.source = "random tokens";
  return d;
}

Indices random_indices(std::mt19937_64& rng, size_t count, int rows) {
  Indices idx(rows);
  for (auto& i : idx) i = static_cast<uint32_t>(rng() % count);
  return idx;
}

// The batch's device token ids and labels equal the data set's rows `idx`.
void expect_token_batch_holds(Backend& backend, const Dataset& d, const DeviceBatch& b, const Indices& idx) {
  const size_t n = idx.size(), t = d.tokens_per_sample;
  ASSERT_EQ(b.rows, static_cast<int>(n));
  ASSERT_EQ(b.labels_per_row, static_cast<int>(t));
  ASSERT_NE(b.token_ids, nullptr);
  ASSERT_NE(b.labels, nullptr);
  EXPECT_EQ(b.features_lowp, nullptr);
  EXPECT_EQ(b.targets_fp32, nullptr);
  std::vector<int32_t> ids(n * t, kPoisonInt32), labels(n * t, kPoisonInt32);
  backend.copy_to_host(ids.data(), b.token_ids, ids.size() * sizeof(int32_t));
  backend.copy_to_host(labels.data(), b.labels, labels.size() * sizeof(int32_t));
  for (size_t r = 0; r < n; ++r)
    for (size_t p = 0; p < t; ++p) {
      ASSERT_EQ(ids[r * t + p], d.token_ids[idx[r] * t + p]) << "token id: row " << r << " position " << p;
      ASSERT_EQ(labels[r * t + p], d.labels[idx[r] * t + p]) << "label: row " << r << " position " << p;
    }
}

// Overwrites a slot's token-id and label regions ([max_batch, T] each) with
// poison. On the CPU backend the device batch's pointers are the slot.
void poison_slot(const DeviceBatch& in_slot, int max_batch, size_t t) {
  const size_t n = static_cast<size_t>(max_batch) * t;
  std::fill_n(const_cast<int32_t*>(in_slot.token_ids), n, kPoisonInt32);
  std::fill_n(const_cast<int32_t*>(in_slot.labels), n, kPoisonInt32);
}

TEST(BatchLoaderTokens, EveryLoadHoldsTheRowsAskedFor) {
  // Random sequences of prefetches (of the next batch, of other rows, none,
  // two in a row) and loads (short batches, repeats). After each load the
  // other slot is poisoned; the batches asked for later are the current one
  // or rows never asked for before, so the loader must gather them into the
  // poisoned slot (a slot it still believes holds an old batch is never
  // asked for: that would be the test's doing, not the loader's).
  std::mt19937_64 rng(test::test_seed());
  CpuBackend cpu(1);
  const Dataset d = random_token_dataset(rng, 500);  // enough one-row batches never asked for
  SCOPED_TRACE("T = " + std::to_string(d.tokens_per_sample) + ", vocab " + std::to_string(d.vocab_size));
  constexpr int kMaxBatch = 8;
  BatchLoader loader(cpu, d, kMaxBatch);
  std::set<Indices> asked;  // every row list loaded or prefetched so far
  auto fresh = [&](int rows) {
    Indices idx;
    do idx = random_indices(rng, d.count, rows);
    while (asked.count(idx));
    return idx;
  };
  std::vector<DeviceBatch> slots;  // a batch of each slot seen so far, for its addresses
  Indices next = fresh(kMaxBatch);
  for (int i = 0; i < 300; ++i) {
    const Indices batch = next;
    asked.insert(batch);
    const int rows = 1 + static_cast<int>(rng() % kMaxBatch);
    next = rng() % 5 == 0 ? batch : fresh(rows);  // now and then the same batch again (resident)
    const DeviceBatch b = loader.load(batch.data(), static_cast<int>(batch.size()));
    expect_token_batch_holds(cpu, d, b, batch);
    if (HasFatalFailure()) return;
    const auto same_slot = [&b](const DeviceBatch& s) { return s.token_ids == b.token_ids; };
    if (std::none_of(slots.begin(), slots.end(), same_slot)) slots.push_back(b);
    ASSERT_LE(slots.size(), 2u) << "a third slot address";
    for (const DeviceBatch& s : slots)
      if (!same_slot(s)) poison_slot(s, kMaxBatch, d.tokens_per_sample);
    switch (rng() % 4) {
      case 0:
        break;   // no prefetch
      case 1: {  // a wrong guess
        const Indices wrong = fresh(rows);
        asked.insert(wrong);
        loader.prefetch(wrong.data(), rows);
        break;
      }
      case 2: {  // a wrong guess replaced by the right one
        const Indices wrong = fresh(rows);
        asked.insert(wrong);
        loader.prefetch(wrong.data(), rows);
        loader.prefetch(next.data(), static_cast<int>(next.size()));
        break;
      }
      default:
        loader.prefetch(next.data(), static_cast<int>(next.size()));
        break;
    }
    // A prefetch never disturbs the batch in use.
    expect_token_batch_holds(cpu, d, b, batch);
    if (HasFatalFailure()) return;
  }
  EXPECT_EQ(slots.size(), 2u);
}

TEST(BatchLoaderTokens, PrefetchOfOtherRowsStillGivesTheAskedRows) {
  std::mt19937_64 rng(test::test_seed());
  CpuBackend cpu(1);
  const Dataset d = random_token_dataset(rng, 40);
  BatchLoader loader(cpu, d, 5);
  const Indices a = random_indices(rng, d.count, 5), b = random_indices(rng, d.count, 4),
                wrong = random_indices(rng, d.count, 4), c = random_indices(rng, d.count, 5);
  expect_token_batch_holds(cpu, d, loader.load(a.data(), 5), a);  // nothing prefetched: on demand
  loader.prefetch(wrong.data(), 4);
  expect_token_batch_holds(cpu, d, loader.load(b.data(), 4), b);  // the guess was wrong: gathered now
  EXPECT_EQ(loader.counts().loaded_on_demand, 2);
  loader.prefetch(c.data(), 5);
  const DeviceBatch got = loader.load(c.data(), 5);
  expect_token_batch_holds(cpu, d, got, c);  // the guess was right: no copy
  EXPECT_EQ(loader.token_ids(), got.token_ids);
  EXPECT_EQ(loader.labels(), got.labels);
  EXPECT_EQ(loader.counts().loads, 3);
  EXPECT_EQ(loader.counts().copies, 4);
  EXPECT_EQ(loader.counts().loaded_on_demand, 2);
}

TEST(BatchLoaderTokens, TwoSlotsAtFixedAddresses) {
  // Consecutive batches alternate between two slots whose addresses never
  // change (steady-state training allocates nothing), token ids and labels
  // alike; the labels region does not overlap the token ids of the batch.
  std::mt19937_64 rng(test::test_seed());
  CpuBackend cpu(1);
  const Dataset d = random_token_dataset(rng, 64);
  constexpr int kMaxBatch = 8;
  BatchLoader loader(cpu, d, kMaxBatch);
  std::set<const int32_t*> id_addresses, label_addresses;
  const int32_t* previous = nullptr;
  for (int i = 0; i < 20; ++i) {
    const Indices batch = random_indices(rng, d.count, kMaxBatch), next = random_indices(rng, d.count, kMaxBatch);
    const DeviceBatch b = loader.load(batch.data(), kMaxBatch);
    if (i % 2) loader.prefetch(next.data(), kMaxBatch);
    EXPECT_NE(b.token_ids, previous) << "batch " << i << " reused the slot of the batch before it";
    previous = b.token_ids;
    const size_t region = kMaxBatch * d.tokens_per_sample;
    EXPECT_TRUE(b.labels >= b.token_ids + region || b.labels + region <= b.token_ids) << "labels overlap the token ids";
    id_addresses.insert(b.token_ids);
    label_addresses.insert(b.labels);
  }
  EXPECT_EQ(id_addresses.size(), 2u);
  EXPECT_EQ(label_addresses.size(), 2u);
}

}  // namespace
}  // namespace ddp
