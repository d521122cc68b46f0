// test_parameter_registry.cpp: named tensors in one flat layout
// (trainer/params/parameter_registry.h): registration order, 16-byte
// alignment with zero padding, pack/unpack, and initial values that are a
// pure function of the seed.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kernels/error.h"
#include "support/test_support.h"
#include "trainer/params/parameter_registry.h"

namespace ddp {
namespace {

ParameterTensor tensor(const std::string& name, std::vector<int64_t> shape, ParameterInit init = ParameterInit::zeros(),
                       int init_order = 0) {
  ParameterTensor t;
  t.name = name;
  t.shape = std::move(shape);
  t.init = init;
  t.init_order = init_order;
  return t;
}

TEST(ParameterRegistry, TensorsFollowEachOtherEachAtA16ByteBoundary) {
  std::mt19937_64 rng(test::test_seed());
  ParameterRegistry r;
  size_t expected_parameters = 0, previous_end = 0;
  for (int i = 0; i < 12; ++i) {
    const int64_t a = 1 + static_cast<int64_t>(rng() % 37), b = 1 + static_cast<int64_t>(rng() % 5);
    const size_t index = r.add(tensor("t" + std::to_string(i), {a, b}));
    ASSERT_EQ(index, static_cast<size_t>(i));
    const ParameterTensor& t = r[index];
    EXPECT_EQ(t.count, static_cast<size_t>(a * b));
    EXPECT_EQ(t.offset % 8, 0u) << t.name;  // 8 FP16 elements = 16 bytes
    EXPECT_EQ(t.offset * sizeof(uint16_t) % 16, 0u) << t.name;
    EXPECT_GE(t.offset, previous_end);      // in registration order, no overlap
    EXPECT_LT(t.offset, previous_end + 8);  // no more padding than alignment needs
    previous_end = t.offset + t.count;
    expected_parameters += t.count;
  }
  EXPECT_EQ(r.flat_count(), previous_end);
  EXPECT_EQ(r.parameter_count(), expected_parameters);
  EXPECT_EQ(r.find("t3"), 3u);
  EXPECT_EQ(r.find("nope"), r.size());
  EXPECT_EQ(r[3].file_stem, "t3");  // the name, unless a model sets another
}

TEST(ParameterRegistry, RepeatedNamesAndEmptyShapesAreRefused) {
  ParameterRegistry r;
  r.add(tensor("w", {2, 2}));
  EXPECT_THROW(r.add(tensor("w", {3})), Error);
  EXPECT_THROW(r.add(tensor("v", {})), Error);
  EXPECT_THROW(r.add(tensor("u", {2, 0})), Error);
}

TEST(ParameterRegistry, PackDropsThePaddingAndUnpackRestoresItAsZeros) {
  std::mt19937_64 rng(test::test_seed());
  ParameterRegistry r;
  r.add(tensor("a", {3, 5}));
  r.add(tensor("b", {7}));
  r.add(tensor("c", {2, 9}));
  ASSERT_GT(r.flat_count(), r.parameter_count());  // there is padding to drop
  std::vector<float> packed(r.parameter_count());
  for (float& v : packed) v = static_cast<float>(rng() % 1000) + 1.0f;  // never zero
  const std::vector<float> flat = r.unpack(packed);
  ASSERT_EQ(flat.size(), r.flat_count());
  size_t at = 0;
  for (const ParameterTensor& t : r.tensors())
    for (size_t j = 0; j < t.count; ++j) EXPECT_EQ(flat[t.offset + j], packed[at++]) << t.name << " " << j;
  size_t zeros = 0;
  for (float v : flat) zeros += v == 0.0f;
  EXPECT_EQ(zeros, r.flat_count() - r.parameter_count());  // exactly the padding
  EXPECT_EQ(r.pack(flat), packed);
  EXPECT_THROW(r.pack(packed), Error);  // not a flat buffer
}

TEST(ParameterRegistry, InitialValuesFollowInitOrderAndTheirDistributions) {
  ParameterRegistry r;
  r.add(tensor("late", {4000}, ParameterInit::normal(0.02f), 1));
  r.add(tensor("early", {3000}, ParameterInit::uniform(0.5f), 0));
  r.add(tensor("gain", {5}, ParameterInit::ones(), 2));
  r.add(tensor("bias", {6}, ParameterInit::zeros(), 3));
  const uint64_t seed = test::test_seed();
  const std::vector<float> v = r.initial_values(seed);
  EXPECT_EQ(r.initial_values(seed), v);  // a pure function of the seed
  EXPECT_NE(r.initial_values(seed + 1), v);
  // "early" draws first: the same values as a registry holding it alone.
  ParameterRegistry alone;
  alone.add(tensor("early", {3000}, ParameterInit::uniform(0.5f), 0));
  const std::vector<float> a = alone.initial_values(seed);
  for (size_t j = 0; j < 3000; ++j) ASSERT_EQ(v[r[1].offset + j], a[j]) << j;
  double max_abs = 0;
  for (size_t j = 0; j < 3000; ++j) max_abs = std::max<double>(max_abs, std::fabs(v[r[1].offset + j]));
  EXPECT_LE(max_abs, 0.5);
  EXPECT_GT(max_abs, 0.49);
  double sum = 0, sum2 = 0;
  for (size_t j = 0; j < 4000; ++j) sum += v[r[0].offset + j], sum2 += double(v[r[0].offset + j]) * v[r[0].offset + j];
  const double mean = sum / 4000, sd = std::sqrt(sum2 / 4000 - mean * mean);
  EXPECT_LT(std::fabs(mean), 0.02 * 5 / std::sqrt(4000.0));  // five standard errors
  EXPECT_NEAR(sd, 0.02, 0.02 * 0.06);
  for (size_t j = 0; j < 5; ++j) EXPECT_EQ(v[r[2].offset + j], 1.0f);
  for (size_t j = 0; j < 6; ++j) EXPECT_EQ(v[r[3].offset + j], 0.0f);
  size_t nonzero_padding = 0;
  for (size_t i = 0; i + 1 < r.size(); ++i)
    for (size_t p = r[i].offset + r[i].count; p < r[i + 1].offset; ++p) nonzero_padding += v[p] != 0.0f;
  EXPECT_EQ(nonzero_padding, 0u);
}

}  // namespace
}  // namespace ddp
