// gpt_spec.h: the GPT's row of the model table (models/model_spec.h).
#pragma once

#include "trainer/models/gpt/gpt_config.h"
#include "trainer/models/model_spec.h"

namespace ddp {

const ModelSpec<GptConfig>& gpt_spec();

}  // namespace ddp
