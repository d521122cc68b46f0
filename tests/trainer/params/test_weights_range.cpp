// test_weights_range.cpp: loaded weights that the working precision cannot
// hold are refused with the tensor named (trainer/params/weights_range.h):
// the thresholds are where each codec starts to round to Inf, and the check
// finds an offending value anywhere, in the packed and the flat layouts.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "kernels/error.h"
#include "kernels/lowp_codec.h"
#include "support/test_support.h"
#include "trainer/models/mlp/mlp_config.h"
#include "trainer/params/weights_range.h"

namespace ddp {
namespace {

TEST(WeightsRange, TheThresholdIsWhereTheCodecStartsToRoundToInf) {
  for (Precision p : {Precision::Fp16, Precision::Bf16}) {
    SCOPED_TRACE(precision_name(p));
    const float threshold = lowp_overflow_threshold(p);
    with_codec(p, [&](auto codec) {
      using Codec = decltype(codec);
      EXPECT_TRUE(std::isinf(Codec::widen(Codec::narrow(threshold))));
      EXPECT_TRUE(std::isinf(Codec::widen(Codec::narrow(-threshold))));
      EXPECT_TRUE(std::isfinite(Codec::widen(Codec::narrow(std::nextafter(threshold, 0.0f)))));
    });
  }
}

TEST(WeightsRange, AValueBeyondTheFormatIsNamedWithItsTensor) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const ParameterRegistry registry = mlp_parameters({6, 5, 3});
  for (bool packed : {true, false}) {
    std::vector<float> weights = packed ? registry.pack(registry.initial_values(seed)) : registry.initial_values(seed);
    check_weights_fit_precision(weights, packed, registry, Precision::Fp16, "w.safetensors");  // passes
    const size_t tensor = rng() % registry.size();
    const ParameterTensor& t = registry[tensor];
    size_t first = t.offset;
    if (packed) {
      first = 0;
      for (size_t i = 0; i < tensor; ++i) first += registry[i].count;
    }
    weights[first + rng() % t.count] = (rng() % 2 ? 1 : -1) * 65520.0f;
    try {
      check_weights_fit_precision(weights, packed, registry, Precision::Fp16, "w.safetensors");
      ADD_FAILURE() << "65520 passed in FP16";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("w.safetensors: tensor " + t.name + " holds "), std::string::npos) << what;
      EXPECT_NE(what.find("--precision bf16"), std::string::npos) << what;
    }
    check_weights_fit_precision(weights, packed, registry, Precision::Bf16, "w.safetensors");  // BF16 holds it
  }
}

TEST(WeightsRange, FP16sLargestValueItselfPasses) {
  const ParameterRegistry registry = mlp_parameters({2, 2});
  std::vector<float> weights(registry.flat_count(), -65504.0f);
  check_weights_fit_precision(weights, false, registry, Precision::Fp16, "w");
  weights[registry[0].offset] = 65519.0f;  // rounds down to 65504
  check_weights_fit_precision(weights, false, registry, Precision::Fp16, "w");
}

}  // namespace
}  // namespace ddp
