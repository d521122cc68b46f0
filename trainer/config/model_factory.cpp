// model_factory.cpp: a case per model (and one in each function of
// model_catalog.cpp).
#include "trainer/config/model_factory.h"

#include "trainer/models/gpt_model.h"
#include "trainer/models/mlp_model.h"

namespace ddp {

std::unique_ptr<Model> make_model(const TrainConfig& c, Backend& backend, int max_batch) {
  if (c.model == "gpt") return std::make_unique<GptModel>(backend, c.gpt, max_batch);
  return std::make_unique<MlpModel>(backend, c.mlp, max_batch);
}

}  // namespace ddp
