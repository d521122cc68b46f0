// test_token_windows.cpp: token streams as language-model samples
// (trainer/data/token_windows.h) and --data text as a whole
// (trainer/data/text_data.h): non-overlapping windows of T+1 tokens at
// stride T with the labels shifted by one, the validation split cut at a
// window boundary, the vocabulary (padded for GPT-2, the real one kept), and
// the refusals: a text shorter than T+1, an empty validation split, a token
// id not below the vocabulary, a validation file of another encoding. Fresh
// random streams and block sizes in every case.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "trainer/data/batch_loader.h"
#include "trainer/io/data_error.h"
#include "trainer/data/data_source.h"
#include "trainer/data/distributed_sampler.h"
#include "trainer/data/dataset.h"
#include "trainer/data/text_data.h"
#include "trainer/data/token_windows.h"
#include "support/data_file_support.h"
#include "support/test_support.h"

namespace ddp {
namespace {

using test::Bytes;

std::vector<uint16_t> random_stream(std::mt19937_64& rng, size_t count, int vocab) {
  std::vector<uint16_t> tokens(count);
  for (uint16_t& t : tokens) t = static_cast<uint16_t>(rng() % static_cast<uint64_t>(vocab));
  return tokens;
}

Bytes random_text(std::mt19937_64& rng, size_t count) {
  Bytes text(count);
  for (uint8_t& b : text) b = static_cast<uint8_t>('a' + rng() % 26);
  return text;
}

DataConfig text_config(const std::string& train, size_t block_size) {
  DataConfig c;
  c.kind = "text";
  c.train_text = train;
  c.block_size = static_cast<int64_t>(block_size);
  return c;
}

// Window i of the Dataset against the stream it came from, position by position.
void expect_windows_of(const Dataset& d, const std::vector<uint16_t>& stream, size_t begin, size_t block_size) {
  const size_t t = block_size;
  ASSERT_EQ(d.tokens_per_sample, t);
  ASSERT_EQ(d.token_ids.size(), d.count * t);
  ASSERT_EQ(d.labels.size(), d.count * t);
  for (size_t i = 0; i < d.count; ++i)
    for (size_t j = 0; j < t; ++j) {
      ASSERT_EQ(d.token_ids[i * t + j], stream[begin + i * t + j]) << "window " << i << ", position " << j;
      ASSERT_EQ(d.labels[i * t + j], stream[begin + i * t + j + 1]) << "window " << i << ", position " << j;
    }
}

TEST(TokenWindows, WindowsOfTPlusOneAtStrideTWithLabelsShiftedByOne) {
  std::mt19937_64 rng(test::test_seed());
  for (int trial = 0; trial < 30; ++trial) {
    const size_t t = 1 + rng() % 40;
    const size_t n = t + 1 + rng() % 2000;
    const int vocab = static_cast<int>(2 + rng() % 1000);
    const std::vector<uint16_t> stream = random_stream(rng, n, vocab);
    const Dataset d = make_token_windows(stream, 0, n, t, vocab, vocab, "stream");
    SCOPED_TRACE("n " + std::to_string(n) + ", T " + std::to_string(t));
    EXPECT_EQ(d.count, (n - 1) / t);
    EXPECT_EQ(d.count, token_window_count(n, t));
    // The windows are llm.c's: the last one ends before the unused tail.
    EXPECT_LE(d.count * t + 1, n);
    EXPECT_GT((d.count + 1) * t + 1, n);
    expect_windows_of(d, stream, 0, t);
    EXPECT_TRUE(d.is_token_data());
    EXPECT_EQ(d.labels_per_sample(), t);
    EXPECT_NO_THROW(validate_dataset(d, d.source));
  }
}

TEST(TokenWindows, AStreamShorterThanTPlusOneIsRefused) {
  std::mt19937_64 rng(test::test_seed());
  const size_t t = 2 + rng() % 300;
  const size_t n = rng() % (t + 1);  // 0 .. T tokens
  const std::vector<uint16_t> stream = random_stream(rng, n, 256);
  test::expect_data_error([&] { make_token_windows(stream, 0, n, t, 256, 256, "short.txt"); },
                          {"short.txt: ", std::to_string(n) + " tokens", "--block-size " + std::to_string(t)});
  // The same through --data text: the file is named.
  const std::string path = test::write_temp("short.txt", Bytes(stream.begin(), stream.end()));
  DataConfig c = text_config(path, t);
  test::expect_data_error([&] { load_text_train_test(c); }, {path + ": ", std::to_string(n) + " tokens, fewer than"});
  c.val_text = test::write_temp("long.txt", random_text(rng, t + 1));
  test::expect_data_error([&] { load_text_train_test(c); }, {path + ": ", std::to_string(n) + " tokens, fewer than"});
  std::swap(c.train_text, c.val_text);
  test::expect_data_error([&] { load_text_train_test(c); }, {path + ": ", std::to_string(n) + " tokens, fewer than"});
}

TEST(TokenWindows, TheValidationSplitIsTheLastFractionCutAtAWindowBoundary) {
  std::mt19937_64 rng(test::test_seed());
  for (int trial = 0; trial < 20; ++trial) {
    const size_t t = 1 + rng() % 32;
    const double fraction = 0.05 + 0.5 * static_cast<double>(rng() % 1000) / 1000.0;
    const size_t n = static_cast<size_t>(static_cast<double>(4 * (t + 1)) / fraction) + rng() % 3000;
    const Bytes text = random_text(rng, n);
    const std::vector<uint16_t> stream(text.begin(), text.end());
    DataConfig c = text_config(test::write_temp("input.txt", text), t);
    c.val_fraction = fraction;
    const TrainTestData d = load_text_train_test(c);
    SCOPED_TRACE("n " + std::to_string(n) + ", T " + std::to_string(t) + ", F " + std::to_string(fraction));
    const size_t cut = validation_cut(n, t, fraction);
    ASSERT_GT(cut, 0u);
    EXPECT_EQ((cut - 1) % t, 0u) << "the training split ends on a window boundary";
    EXPECT_GE(static_cast<double>(n - cut), fraction * static_cast<double>(n)) << "validation holds at least F";
    EXPECT_LT(static_cast<double>(n - cut), fraction * static_cast<double>(n) + static_cast<double>(t) + 1);
    EXPECT_EQ(d.train.count, (cut - 1) / t);
    EXPECT_EQ(d.test.count, token_window_count(n - cut, t));
    expect_windows_of(d.train, stream, 0, t);
    expect_windows_of(d.test, stream, cut, t);
    // No token is in both splits: training windows end at cut - 1.
    EXPECT_EQ(d.train.count * t, cut - 1);
    EXPECT_NE(d.test.source.find("validation"), std::string::npos) << d.test.source;
  }
}

TEST(TokenWindows, AValidationTextIsReadAsItsOwnWindows) {
  std::mt19937_64 rng(test::test_seed());
  const size_t t = 1 + rng() % 32;
  const Bytes train = random_text(rng, t + 1 + rng() % 2000), val = random_text(rng, t + 1 + rng() % 500);
  DataConfig c = text_config(test::write_temp("train.txt", train), t);
  c.val_text = test::write_temp("val.txt", val);
  const TrainTestData d = load_text_train_test(c);
  expect_windows_of(d.train, std::vector<uint16_t>(train.begin(), train.end()), 0, t);
  expect_windows_of(d.test, std::vector<uint16_t>(val.begin(), val.end()), 0, t);
  EXPECT_EQ(d.train.vocab_size, 256);
  EXPECT_EQ(d.train.real_vocab_size, 256);
  EXPECT_EQ(d.test.source, c.val_text);
}

TEST(TokenWindows, AnEmptyValidationSplitIsRefused) {
  std::mt19937_64 rng(test::test_seed());
  const size_t t = 8 + rng() % 32;
  // Training windows end exactly v tokens before the end: the validation
  // split's v <= T tokens make no window.
  const size_t v = 1 + rng() % t, n = (10 + rng() % 50) * t + 1 + v;
  DataConfig c = text_config(test::write_temp("input.txt", random_text(rng, n)), t);
  c.val_fraction = (static_cast<double>(v) - 0.5) / static_cast<double>(n);  // ceil(F n) = v
  test::expect_data_error([&] { load_text_train_test(c); },
                          {c.train_text + ": ", "empty validation split", "--val-fraction", "--block-size"});
  // And the other way: a fraction that leaves no training window.
  c.val_fraction = 1.0 - static_cast<double>(t / 2) / static_cast<double>(n);
  test::expect_data_error([&] { load_text_train_test(c); }, {c.train_text + ": ", "training split", "--val-fraction"});
}

TEST(TokenWindows, GptTwoTokensPadTheModelsVocabularyAndKeepTheRealOne) {
  std::mt19937_64 rng(test::test_seed());
  const TokenVocab gpt2 = token_vocab(TokenEncoding::Llmc, 0);
  EXPECT_EQ(gpt2.real_vocab_size, 50257);
  EXPECT_EQ(gpt2.vocab_size, 50304);  // llm.c's padded_vocab_size
  EXPECT_EQ(token_vocab(TokenEncoding::RawU16, 0).vocab_size, 50304);
  EXPECT_EQ(token_vocab(TokenEncoding::Bytes, 0).vocab_size, 256);
  const int64_t given = 1 + static_cast<int64_t>(rng() % 70000);
  const TokenVocab v = token_vocab(TokenEncoding::RawU16, given);  // as given: another tokenizer's
  EXPECT_EQ(v.vocab_size, given);
  EXPECT_EQ(v.real_vocab_size, given);
  // Given above the encoding's own vocabulary, --vocab-size pads it; below, it bounds the ids.
  const TokenVocab padded = token_vocab(TokenEncoding::Llmc, 50257 + 1 + static_cast<int64_t>(rng() % 1000));
  EXPECT_EQ(padded.real_vocab_size, 50257);
  EXPECT_GT(padded.vocab_size, 50257);
  EXPECT_EQ(token_vocab(TokenEncoding::Llmc, 50257).vocab_size, 50257);  // a GPT-2 checkpoint's, unpadded
  EXPECT_EQ(token_vocab(TokenEncoding::Bytes, 300).real_vocab_size, 256);
  EXPECT_EQ(token_vocab(TokenEncoding::Bytes, 300).vocab_size, 300);
  EXPECT_EQ(token_vocab(TokenEncoding::Bytes, 97).real_vocab_size, 97);

  // A raw-u16 file through --data text: ids up to 50256 are tokens, 50257 is not.
  std::vector<uint16_t> stream = random_stream(rng, 600, 50257);
  stream[rng() % stream.size()] = 50256;
  Bytes bytes = test::le_bytes(stream);
  DataConfig c = text_config(test::write_temp("train.bin", bytes), 16);
  c.token_format = "raw-u16";
  const TrainTestData d = load_text_train_test(c);
  EXPECT_EQ(d.train.vocab_size, 50304);
  EXPECT_EQ(d.train.num_classes, 50304);
  EXPECT_EQ(d.train.real_vocab_size, 50257);
  EXPECT_NO_THROW(validate_dataset(d.train, "train"));
  const size_t position = rng() % stream.size();
  stream[position] = static_cast<uint16_t>(50257 + rng() % 47);  // a padded class: not a GPT-2 token
  c.train_text = test::write_temp("bad.bin", test::le_bytes(stream));
  test::expect_data_error([&] { load_text_train_test(c); },
                          {c.train_text + ": ", "position " + std::to_string(position), "50257", "--vocab-size"});
}

TEST(TokenWindows, AValidationFileOfAnotherEncodingIsRefused) {
  std::mt19937_64 rng(test::test_seed());
  std::vector<int32_t> header(256, 0);
  header[0] = 20240520;
  header[1] = 1;
  header[2] = 300;
  Bytes shard = test::le_bytes(header);
  const Bytes body = test::le_bytes(random_stream(rng, 300, 50257));
  shard.insert(shard.end(), body.begin(), body.end());
  DataConfig c = text_config(test::write_temp("train.bin", shard), 16);
  c.val_text = test::write_temp("val.txt", random_text(rng, 400));
  test::expect_data_error([&] { load_text_train_test(c); }, {c.val_text + ": ", "bytes", "llm.c", c.train_text});
}

// The trainer's consistency check knows the padded classes too.
TEST(TokenWindows, ValidateRefusesATokenIdAboveTheRealVocabulary) {
  std::mt19937_64 rng(test::test_seed());
  const size_t t = 1 + rng() % 16;
  std::vector<uint16_t> stream = random_stream(rng, 10 * t + 1, 100);
  Dataset d = make_token_windows(stream, 0, stream.size(), t, 128, 100, "tokens");
  EXPECT_NO_THROW(validate_dataset(d, "tokens"));
  const size_t at = rng() % d.token_ids.size();
  d.token_ids[at] = 100 + static_cast<int32_t>(rng() % 28);
  test::expect_data_error([&] { validate_dataset(d, "tokens"); }, {"tokens: bad token id", "real_vocab_size 100"});
  d = make_token_windows(stream, 0, stream.size(), t, 128, 200, "tokens");
  test::expect_data_error([&] { validate_dataset(d, "tokens"); },
                          {"tokens: ", "real_vocab_size 200", "vocab_size 128"});
}

// The windows go through the existing sampler and loader unchanged: two
// ranks' shuffled epochs hold disjoint windows that together are all of
// them, and each loaded row is its window of the text, labels shifted by one.
TEST(TokenWindows, TheSamplerAndLoaderServeWindowsOfTheText) {
  std::mt19937_64 rng(test::test_seed());
  const size_t t = 2 + rng() % 30;
  const Bytes text = random_text(rng, 50 * (t + 1) + rng() % 1000);
  const std::vector<uint16_t> stream(text.begin(), text.end());
  DataConfig c = text_config(test::write_temp("input.txt", text), t);
  c.val_text = c.train_text;
  const TrainTestData d = load_text_train_test(c);
  CpuBackend cpu(1);
  constexpr int kBatch = 4;
  const uint64_t seed = rng();
  const int64_t epoch = static_cast<int64_t>(rng() % 5);
  std::set<uint32_t> seen;
  for (int rank = 0; rank < 2; ++rank) {
    const std::vector<uint32_t> order =
        DistributedSampler(d.train.count, rank, 2, seed, true, true).rank_indices(epoch);
    BatchLoader loader(cpu, d.train, kBatch);
    for (size_t at = 0; at + kBatch <= order.size(); at += kBatch) {
      const DeviceBatch b = loader.load(order.data() + at, kBatch);
      std::vector<int32_t> ids(kBatch * t), labels(kBatch * t);
      cpu.copy_to_host(ids.data(), b.token_ids, ids.size() * sizeof(int32_t));
      cpu.copy_to_host(labels.data(), b.labels, labels.size() * sizeof(int32_t));
      for (int r = 0; r < kBatch; ++r) {
        const size_t start = order[at + r] * t;
        for (size_t j = 0; j < t; ++j) {
          ASSERT_EQ(ids[r * t + j], stream[start + j]) << "window " << order[at + r] << ", position " << j;
          ASSERT_EQ(labels[r * t + j], stream[start + j + 1]) << "window " << order[at + r] << ", position " << j;
        }
      }
    }
    for (uint32_t w : order) EXPECT_TRUE(seen.insert(w).second) << "window " << w << " on both ranks";
  }
  EXPECT_EQ(seen.size(), d.train.count / 2 * 2);  // drop_last: an odd window out
}

// --data text through load_train_test, as ddp_train calls it.
TEST(TokenWindows, DataTextLoadsThroughTheDataSource) {
  std::mt19937_64 rng(test::test_seed());
  DataConfig c = text_config(test::write_temp("input.txt", random_text(rng, 5000)), 64);
  const TrainTestData d = load_train_test(c, 0);
  EXPECT_EQ(d.train.tokens_per_sample, 64u);
  EXPECT_GT(d.test.count, 0u);
  c.train_text.clear();
  try {
    load_train_test(c, 0);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--train-text is required with --data text"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ddp
