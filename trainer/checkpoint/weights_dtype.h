// weights_dtype.h: --save-weights-dtype fp32 | fp16 | bf16: the exported
// weights (safetensors, a Hugging Face directory) written from the FP32
// masters in FP32, or rounded once to nearest even into FP16 or BF16, as
// PyTorch's `.half()` / `.to(torch.bfloat16)` do. --init-weights widens any
// of them back exactly (weights_io.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "trainer/io/safetensors.h"
#include "trainer/params/parameter_registry.h"

namespace ddp {

// "fp32", "fp16", "bf16" to F32, F16, BF16; Error naming the flag otherwise.
SafetensorsDtype weights_dtype_named(const std::string& name);
// transformers' config.json "torch_dtype": "float32", "float16", "bfloat16".
const char* torch_dtype_name(SafetensorsDtype dtype);

// The dtype the model's weights can be written in: `asked`, except FP16
// where a finite weight would round to Inf (FP16 ends at 65504: an
// exported Inf would poison every forward pass of whoever loads it). The
// weights are then written in FP32 instead, nothing is lost, and `note`
// says why in a line naming the tensor and value ("" when `asked` holds).
SafetensorsDtype dtype_that_holds(const ParameterRegistry& registry, const std::vector<float>& flat,
                                  SafetensorsDtype asked, std::string& note);

// `count` FP32 values as little-endian bytes of `dtype`.
std::vector<uint8_t> weights_bytes(const float* values, size_t count, SafetensorsDtype dtype);

// A tensor for write_safetensors of `count` FP32 `values` in `dtype`: FP32
// points at the values themselves (no copy of the model at export); FP16
// and BF16 round them into a buffer appended to `held`, which must outlive
// the write.
SafetensorsTensorOut weights_tensor_out(const std::string& name, const std::vector<int64_t>& shape, const float* values,
                                        size_t count, SafetensorsDtype dtype, std::vector<std::vector<uint8_t>>& held);

}  // namespace ddp
