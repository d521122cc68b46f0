// model_factory.cpp: the configured model's row of the model table builds it.
#include "trainer/config/model_factory.h"

#include "trainer/config/model_table.h"

namespace ddp {

std::unique_ptr<Model> make_model(const TrainConfig& c, Backend& backend, int max_batch) {
  return model_row(c.model).make(c, backend, max_batch);
}

}  // namespace ddp
