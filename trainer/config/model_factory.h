// model_factory.h: builds the configured model on a backend (the other
// half of model_catalog.h, which describes it without building it).
#pragma once

#include <memory>

#include "kernels/backend.h"
#include "trainer/models/model.h"
#include "trainer/config/train_config.h"

namespace ddp {

std::unique_ptr<Model> make_model(const TrainConfig& config, Backend& backend, int max_batch);

}  // namespace ddp
