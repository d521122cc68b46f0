// loss_scaler_state.h: the dynamic loss scaler's state, the part of it a
// checkpoint carries (checkpoint/train_state.h) and a resume restores.
#pragma once

#include <cstdint>

namespace ddp {

struct LossScalerState {
  double scale = 65536.0;       // current loss scale S (double: `--init-scale 1e12` must survive)
  int64_t growth_tracker = 0;   // consecutive clean steps since the last growth/backoff
  int64_t hysteresis_left = 1;  // overflows still tolerated before a backoff
};

}  // namespace ddp
