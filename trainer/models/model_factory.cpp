// model_factory.cpp: the MLP is the only model so far; a second one adds
// its case here (and in model_catalog.cpp).
#include "trainer/models/model_factory.h"

#include "trainer/models/mlp_model.h"

namespace ddp {

std::unique_ptr<Model> make_model(const TrainConfig& c, Backend& backend, int max_batch) {
  return std::make_unique<MlpModel>(backend, c.mlp, max_batch);
}

}  // namespace ddp
