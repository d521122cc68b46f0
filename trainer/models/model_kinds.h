// model_kinds.h: what a checkpoint may say about its model without a run's
// config: the kinds there are, and whether a kind's dims describe a model.
// Below the config (config/model_catalog.h maps a TrainConfig to its model),
// so checkpoint validation needs no TrainConfig.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ddp {

// The model kinds ("mlp", "gpt"), in the order messages list them.
const std::vector<std::string>& model_kind_names();

// A checkpoint's dims: the first problem with them, or "" with `count` set
// to the parameter count they imply.
std::string checkpoint_dims_problem(const std::vector<int64_t>& dims, uint64_t& count);
// The same for a checkpoint of that model kind ("mlp", "gpt").
std::string checkpoint_dims_problem(const std::string& model_kind, const std::vector<int64_t>& dims,
                                    uint64_t& count);
// "784,512,10", for messages comparing a checkpoint's dims with this run's.
std::string dims_text(const std::vector<int64_t>& dims);

}  // namespace ddp
