// optimizer_kind.h: which update rule the optimizer applies (--optimizer),
// as plain data the config can hold without the optimizer's buffers.
#pragma once

#include <string>

namespace ddp {

enum class OptimizerKind { Sgd, AdamW };

OptimizerKind parse_optimizer_kind(const std::string& text);  // throws ddp::Error naming --optimizer
const char* optimizer_kind_name(OptimizerKind kind);          // "sgd" | "adamw"

}  // namespace ddp
