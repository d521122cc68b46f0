// weights_io.h: model parameters to and from NumPy: one float32 .npy file
// per parameter tensor, DIR/<file stem>.npy in the tensor's PyTorch shape
// (models/parameter_registry.h; the MLP's files are layer<i>.weight.npy
// [out, in] and layer<i>.bias.npy [out], i counting Linear layers from 0 in
// forward order).
#pragma once

#include <string>
#include <vector>

#include "trainer/models/parameter_registry.h"

namespace ddp {

// The files save_weights_npy writes for these tensors, in registry order.
std::vector<std::string> weights_npy_paths(const std::string& dir, const ParameterRegistry& registry);

// flat: the registry's flat layout.
void save_weights_npy(const std::string& dir, const ParameterRegistry& registry, const std::vector<float>& flat);
// Reads every tensor into the flat layout (padding zero), checking its
// shape; throws naming the file on any problem.
std::vector<float> load_weights_npy(const std::string& dir, const ParameterRegistry& registry);

}  // namespace ddp
