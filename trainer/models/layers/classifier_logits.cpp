// classifier_logits.cpp
#include "trainer/models/layers/classifier_logits.h"

#include "kernels/error.h"

namespace ddp {

ClassifierLogits parse_classifier_logits(const std::string& text) {
  if (text == "keep") return ClassifierLogits::Keep;
  if (text == "drop") return ClassifierLogits::Drop;
  throw Error("--classifier-logits: '" + text + "' is not one of keep, drop");
}

const char* classifier_logits_name(ClassifierLogits logits) {
  return logits == ClassifierLogits::Drop ? "drop" : "keep";
}

}  // namespace ddp
