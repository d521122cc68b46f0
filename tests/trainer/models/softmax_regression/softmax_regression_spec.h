// softmax_regression_spec.h: the test-only model's row of the model table.
// Its settings are the MLP's --layers IN,CLASSES (TrainConfig::mlp), so it
// needs no settings of its own in TrainConfig; a model with settings of its
// own adds them there and its flags to launch/cli/options.cpp.
#pragma once

#include "trainer/models/mlp/mlp_config.h"
#include "trainer/models/model_spec.h"

namespace ddp::test {

inline constexpr const char* kSoftmaxRegression = "softmax-regression";

const ModelSpec<MlpConfig>& softmax_regression_spec();

// Adds the row to the model table (and its kind to the checkpoint kinds)
// once per process; later calls do nothing.
void register_softmax_regression();

}  // namespace ddp::test
