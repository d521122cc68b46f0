// activation_report.cpp
#include "trainer/report/activation_report.h"

#include <cstdio>

namespace ddp {

namespace {
std::string mib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f MiB", bytes / (1 << 20));
  return text;
}
}  // namespace

std::string activation_line(const ActivationKinds& kinds) {
  if (kinds.empty()) return "";
  std::string line = "activations per rank by kind (allocated [formula]):";
  for (size_t i = 0; i < kinds.size(); ++i) {
    const ActivationKind& k = kinds[i];
    line += (i ? ", " : " ") + k.name + " " + mib(static_cast<double>(k.bytes)) + " [" + mib(k.formula_bytes) +
            " = " + k.formula + "]";
  }
  return line + "; total " + mib(static_cast<double>(activation_bytes_total(kinds))) + " [" +
         mib(activation_formula_total(kinds)) + "]";
}

void add_activation_fields(JsonRecord& r, const ActivationKinds& kinds) {
  if (kinds.empty()) return;
  for (const ActivationKind& k : kinds) {
    r.add("activation_" + k.name + "_bytes", k.bytes);
    r.add("activation_" + k.name + "_formula_bytes", k.formula_bytes);
    r.add("activation_" + k.name + "_formula", k.formula);
  }
  r.add("activation_bytes", activation_bytes_total(kinds));
  r.add("activation_formula_bytes", activation_formula_total(kinds));
}

}  // namespace ddp
