// weights_io.h: model parameters to and from NumPy, PyTorch nn.Linear layout:
// DIR/layer<i>.weight.npy [out, in] and DIR/layer<i>.bias.npy [out], float32,
// i counting Linear layers from 0 in forward order.
#pragma once

#include <string>
#include <vector>

#include "trainer/parameter_store.h"

namespace ddp {

// The files save_weights_npy writes for a model of that many Linear layers.
std::vector<std::string> weights_npy_paths(const std::string& dir, size_t linear_layers);

// flat: the store's flat layout (reverse layer order).
void save_weights_npy(const std::string& dir, const ParameterLayout& layout, const std::vector<float>& flat);
// Reads every tensor, checking its shape; throws naming the file on any problem.
std::vector<float> load_weights_npy(const std::string& dir, const ParameterLayout& layout);

}  // namespace ddp
