// mlp_config.h: the MLP's own settings (--layers, --activation), its
// parameters as named tensors, and the checks that need its shape. Read by
// the MLP's own files (its spec, mlp_spec.h, is its row of the model table).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/elementwise_math.h"
#include "trainer/models/loss_kind.h"
#include "trainer/params/parameter_registry.h"

namespace ddp {

struct TrainTestData;

struct MlpConfig {
  std::vector<int64_t> layer_widths = {784, 512, 512, 10};  // input, hidden..., output
  Activation activation = Activation::Relu;
  std::string activation_name = "relu";  // as on the command line and in checkpoints
};

// --layers "784,512,10" and --activation relu|gelu; throws naming the flag.
void set_mlp_options(MlpConfig& mlp, const std::string& layers, const std::string& activation);

// The MLP as PyTorch's nn.Sequential(Linear, act, Linear, ..., Linear):
// Linear i is module 2i, so its tensors are "<2i>.weight" [out, in] and
// "<2i>.bias" [out], registered last layer first (the order backward
// finishes them), drawn first layer first (weight, then bias) with
// nn.Linear's initialisation. Their .npy files keep the names they had
// before tensors were named: layer<i>.weight.npy, layer<i>.bias.npy.
ParameterRegistry mlp_parameters(const std::vector<int64_t>& widths);
inline ParameterRegistry mlp_parameters(const MlpConfig& mlp) { return mlp_parameters(mlp.layer_widths); }
// What a checkpoint records of the MLP's shape: its widths.
inline const std::vector<int64_t>& mlp_dims(const MlpConfig& mlp) { return mlp.layer_widths; }
std::string mlp_tensor_prefix(size_t linear_index);

// Model FLOPs per sample of one training step: forward 2*in*out per layer,
// backward 4*in*out (dX and dW), less the first layer's dX (2*in*out),
// which nothing needs.
double mlp_flops_per_sample(const std::vector<int64_t>& widths);

// "784-512-10" (separator "-")
std::string mlp_widths_text(const std::vector<int64_t>& widths, const char* separator = "-");

// For a checkpoint's model dims (the MLP's widths): the first problem,
// naming it, or "" with `count` set to the parameter count they imply.
std::string mlp_dims_problem(const std::vector<int64_t>& widths, uint64_t& count);

// The data fits the model: input width = features; for --loss xent every
// label below the output width; for --loss mse output width = targets.
void check_mlp_matches_data(const MlpConfig& mlp, LossKind loss, const TrainTestData& data);

}  // namespace ddp
