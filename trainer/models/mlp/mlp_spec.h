// mlp_spec.h: the MLP's row of the model table (models/model_spec.h).
#pragma once

#include "trainer/models/mlp/mlp_config.h"
#include "trainer/models/model_spec.h"

namespace ddp {

const ModelSpec<MlpConfig>& mlp_spec();

}  // namespace ddp
