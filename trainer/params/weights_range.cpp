// weights_range.cpp
#include "trainer/params/weights_range.h"

#include <cmath>
#include <cstring>
#include <sstream>

#include "kernels/error.h"

namespace ddp {

float lowp_overflow_threshold(Precision precision) {
  if (precision == Precision::Fp16) return 65520.0f;  // halfway from 65504 to the next step, 65536: rounds up
  const uint32_t bits = 0x7f7f8000u;                   // halfway from BF16's largest, 0x7f7f, to Inf
  float threshold;
  std::memcpy(&threshold, &bits, sizeof threshold);
  return threshold;
}

void check_weights_fit_precision(const std::vector<float>& weights_fp32, bool packed,
                                 const ParameterRegistry& registry, Precision precision, const std::string& source) {
  const float threshold = lowp_overflow_threshold(precision);
  size_t at = 0;
  for (const ParameterTensor& t : registry.tensors()) {
    const size_t first = packed ? at : t.offset;
    at += t.count;
    DDP_REQUIRE(first + t.count <= weights_fp32.size(), "weights shorter than their registry");
    for (size_t i = first; i < first + t.count; ++i) {
      const float v = weights_fp32[i];
      if (std::fabs(v) < threshold) continue;
      std::ostringstream value;
      value << v;
      if (!std::isfinite(v))
        throw Error(source + ": tensor " + t.name + " holds " + value.str() + ": not a weight a run can start from");
      if (precision == Precision::Fp16)
        throw Error(source + ": tensor " + t.name + " holds " + value.str() +
                    ", beyond FP16's largest value 65504: its FP16 working copy would be Inf; --precision bf16 "
                    "holds FP32's range");
      throw Error(source + ": tensor " + t.name + " holds " + value.str() +
                  ", beyond BF16's largest value: its BF16 working copy would be Inf");
    }
  }
}

}  // namespace ddp
