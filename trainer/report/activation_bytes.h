// activation_bytes.h: what a model holds besides its parameters (the
// activations it keeps for backward and its scratch), by kind: the bytes
// its buffers were allocated with next to an independent formula, so the
// banner, the metrics and --bench can show both (memory_report.h,
// activation_report.h) and a test can hold the two equal.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace ddp {

struct ActivationKind {
  std::string name;           // one word, a JSON key part: "attention", "mlp", "layernorm", ...
  size_t bytes = 0;           // the buffers' sizes, as allocated (the tally counts these)
  double formula_bytes = 0;   // the formula evaluated at the model's shape and max batch
  std::string formula;        // the formula in symbols (B batch, T context, R = B T rows, C width, ...)
};
using ActivationKinds = std::vector<ActivationKind>;

inline size_t activation_bytes_total(const ActivationKinds& kinds) {
  size_t sum = 0;
  for (const ActivationKind& k : kinds) sum += k.bytes;
  return sum;
}

inline double activation_formula_total(const ActivationKinds& kinds) {
  double sum = 0;
  for (const ActivationKind& k : kinds) sum += k.formula_bytes;
  return sum;
}

}  // namespace ddp
