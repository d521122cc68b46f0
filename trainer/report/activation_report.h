// activation_report.h: a model's activation bytes by kind (activation_bytes.h)
// for the banner, the metrics' memory record and --bench's JSON line: each
// kind's allocated bytes beside its formula's value and the formula itself.
#pragma once

#include <string>

#include "trainer/io/json_writer.h"
#include "trainer/report/activation_bytes.h"

namespace ddp {

// "activations per rank by kind (allocated, [formula]): attention 1.50 MiB
// [1.50 MiB = L(...)], ...; total ...". Empty for a model that states none.
std::string activation_line(const ActivationKinds& kinds);

// activation_<kind>_bytes, activation_<kind>_formula_bytes,
// activation_<kind>_formula (the symbols), and the totals activation_bytes
// and activation_formula_bytes; none for a model that states none.
void add_activation_fields(JsonRecord& record, const ActivationKinds& kinds);

}  // namespace ddp
