// npy_dataset.h: a data set of two NumPy files, features x and labels or
// targets y (the file format itself is io/npy_io.h).
#pragma once

#include <string>

#include "trainer/data/dataset.h"

namespace ddp {

// x: [N, D] f4/f8/u1. y: [N] i4/i8 class labels, or [N, K] / [N] f4/f8
// regression targets. DataError on a dtype, shape or count mismatch.
Dataset load_npy_dataset(const std::string& x_path, const std::string& y_path);

}  // namespace ddp
