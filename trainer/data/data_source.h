// data_source.h: picks and loads the train and test sets named by --data.
#pragma once

#include <cstdint>
#include <utility>

#include "trainer/data/data_config.h"
#include "trainer/data/dataset.h"

namespace ddp {

struct TrainTestData {
  Dataset train;
  Dataset test;
};

// Throws DataError / ddp::Error with one line naming the file or flag.
TrainTestData load_train_test(const DataConfig& config, uint64_t seed);

}  // namespace ddp
