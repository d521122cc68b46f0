// model_kinds.h: what a checkpoint may say about its model without a run's
// config: the kinds there are (each model's ModelKind, models/model_spec.h),
// and whether a kind's dims describe a model. Below the config
// (config/model_table.h maps a TrainConfig to its model), so checkpoint
// validation needs no TrainConfig.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trainer/models/model_spec.h"

namespace ddp {

// The model kinds ("mlp", "gpt", then any registered), in the order
// messages list them.
std::vector<std::string> model_kind_names();

// The activation names a checkpoint may record: every kind's, in kind order.
std::vector<std::string> model_activation_names();

// A kind besides the built-in ones (config/model_table.h's register_model
// calls it: a test's own model). Throws if the name is taken.
void register_model_kind(const ModelKind& kind);

// A version-1 checkpoint's dims (an MLP's widths): the first problem with
// them, or "" with `count` set to the parameter count they imply.
std::string checkpoint_dims_problem(const std::vector<int64_t>& dims, uint64_t& count);
// The same for a checkpoint of that model kind.
std::string checkpoint_dims_problem(const std::string& model_kind, const std::vector<int64_t>& dims, uint64_t& count);
// "784,512,10", for messages comparing a checkpoint's dims with this run's.
std::string dims_text(const std::vector<int64_t>& dims);

}  // namespace ddp
