// weights_io.h: model parameters to and from files PyTorch reads, in two
// forms chosen by the path (--save-weights, --init-weights):
//  - PATH.safetensors: one safetensors file (safetensors.h), every tensor
//    under its state_dict name in its PyTorch shape, so
//    safetensors.torch.load_file(PATH) loads straight into the equivalent
//    nn.Module (the MLP: nn.Sequential of nn.Linear and activations);
//    written F32, F16 or BF16 (weights_dtype.h), read from any of them
//    (widened exactly);
//  - any other PATH: a directory of float32 .npy files, one per tensor,
//    DIR/<file stem>.npy (params/parameter_registry.h; the MLP's are
//    layer<i>.weight.npy [out, in] and layer<i>.bias.npy [out], i counting
//    Linear layers from 0 in forward order).
#pragma once

#include <string>
#include <vector>

#include "trainer/io/safetensors.h"
#include "trainer/params/parameter_registry.h"

namespace ddp {

// Whether `path` names the safetensors form: it ends in ".safetensors".
bool is_safetensors_path(const std::string& path);

// Either form, by the path (load_weights also reads Hugging Face GPT-2
// weights, hf_gpt2.h). flat: the registry's flat layout. `tokenizer`
// (tokenizer/tokenizer_kind.h; "" none) goes into a safetensors file's
// metadata, so --generate decodes with it; a .npy directory has no place for it.
// `dtype`: the safetensors form's (a .npy directory is FP32 only).
void save_weights(const std::string& path, const ParameterRegistry& registry, const std::vector<float>& flat,
                  const std::string& tokenizer = "", SafetensorsDtype dtype = SafetensorsDtype::F32);
std::vector<float> load_weights(const std::string& path, const ParameterRegistry& registry);

// The model's weights in registry order, in `dtype` (FP32, or rounded once
// to FP16 or BF16), metadata {"format": "pt"} (what Hugging Face's loaders
// look for) and "tokenizer" where given, written atomically.
void save_weights_safetensors(const std::string& path, const ParameterRegistry& registry,
                              const std::vector<float>& flat, const std::string& tokenizer = "",
                              SafetensorsDtype dtype = SafetensorsDtype::F32);
// The tokenizer a weights file records: a safetensors file's "tokenizer"
// metadata (DataError for an unknown name), "" where it has none or for a
// .npy directory.
std::string weights_tokenizer(const std::string& path);
// DataError where the weights at `path` record a tokenizer and a run's
// (`tokenizer`, "" unknown) is another: ids of one mean nothing to the other.
void check_weights_tokenizer(const std::string& path, const std::string& tokenizer);
// Every tensor of the model into the flat layout (padding zero). DataError
// naming the file and the tensor when one is missing, is not the model's
// (an extra tensor), or has another shape; and the reader's own checks.
std::vector<float> load_weights_safetensors(const std::string& path, const ParameterRegistry& registry);

// "[2, 3]", for messages.
std::string shape_text(const std::vector<int64_t>& shape);

// Weights to start from must be finite: one NaN or Inf makes every step's
// gradients non-finite, so every step is skipped until --max-bad-steps ends
// the run (and an evaluation of them means nothing). DataError naming
// `path`, the tensor and the element. The .npy reader refuses them itself.
void require_finite_weights(const std::string& path, const std::string& tensor, const std::vector<float>& values);

// The files save_weights_npy writes for these tensors, in registry order.
std::vector<std::string> weights_npy_paths(const std::string& dir, const ParameterRegistry& registry);

// flat: the registry's flat layout.
void save_weights_npy(const std::string& dir, const ParameterRegistry& registry, const std::vector<float>& flat);
// Reads every tensor into the flat layout (padding zero), checking its
// shape; throws naming the file on any problem.
std::vector<float> load_weights_npy(const std::string& dir, const ParameterRegistry& registry);

}  // namespace ddp
