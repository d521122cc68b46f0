// classifier_logits.h: whether the GPT's chunked LM head keeps the
// [B T, V] logits (their gradient, written over them) from forward to
// backward (--classifier-logits), as plain data a config holds. A run
// setting, never recorded: a checkpoint of one resumes at the other.
//   Keep  (llm.c's fused classifier) one FP16 [R, V] buffer: forward writes
//         each chunk's gradient over its logits, backward reads them for
//         dx and d_wte. The unchunked head's bits on the CPU.
//   Drop  (Liger's fused linear cross-entropy) forward also runs each
//         chunk's backward while its gradient is fresh: dx's rows into an
//         FP16 [R, C] buffer and d_wte's share summed into an FP32 [V, C]
//         one, so only a chunk of logits ever exists. The loss and dx are
//         Keep's bits; d_wte sums the same products in FP32 in another
//         order (by chunks) and rounds once, so it may differ from Keep's
//         in the last FP16 bit (tied_classifier.h).
#pragma once

#include <string>

namespace ddp {

enum class ClassifierLogits { Keep, Drop };

ClassifierLogits parse_classifier_logits(const std::string& text);  // throws ddp::Error naming --classifier-logits
const char* classifier_logits_name(ClassifierLogits logits);        // "keep" | "drop"

}  // namespace ddp
