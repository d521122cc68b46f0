// weights_dtype.cpp
#include "trainer/checkpoint/weights_dtype.h"

#include <cmath>
#include <cstring>

#include "kernels/bfloat16.h"
#include "kernels/error.h"
#include "kernels/half.h"

namespace ddp {

SafetensorsDtype weights_dtype_named(const std::string& name) {
  if (name == "fp32") return SafetensorsDtype::F32;
  if (name == "fp16") return SafetensorsDtype::F16;
  if (name == "bf16") return SafetensorsDtype::BF16;
  throw Error("--save-weights-dtype: '" + name + "' is not one of fp32, fp16, bf16");
}

const char* torch_dtype_name(SafetensorsDtype dtype) {
  switch (dtype) {
    case SafetensorsDtype::F16:
      return "float16";
    case SafetensorsDtype::BF16:
      return "bfloat16";
    case SafetensorsDtype::F32:
      break;
  }
  return "float32";
}

SafetensorsDtype dtype_that_holds(const ParameterRegistry& registry, const std::vector<float>& flat,
                                  SafetensorsDtype asked, std::string& note) {
  note.clear();
  if (asked != SafetensorsDtype::F16) return asked;
  for (const ParameterTensor& t : registry.tensors()) {
    for (size_t i = 0; i < t.count; ++i) {
      const float v = flat[t.offset + i];
      if (!std::isfinite(v) || std::isfinite(half_to_float(to_half(v)))) continue;
      note = "--save-weights-dtype fp16: tensor " + t.name + " holds " + std::to_string(v) + " (element " +
             std::to_string(i) +
             "), beyond FP16's 65504: the weights are written in fp32 instead (bf16 has "
             "fp32's range)";
      return SafetensorsDtype::F32;
    }
  }
  return asked;
}

std::vector<uint8_t> weights_bytes(const float* values, size_t count, SafetensorsDtype dtype) {
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "little-endian host: the bytes are written as they are");
  std::vector<uint8_t> bytes(count * safetensors_dtype_bytes(dtype));
  if (dtype == SafetensorsDtype::F32) {
    if (count > 0) std::memcpy(bytes.data(), values, count * sizeof(float));
    return bytes;
  }
  for (size_t i = 0; i < count; ++i) {
    const uint16_t bits = dtype == SafetensorsDtype::F16 ? to_half(values[i]).bits : to_bfloat16(values[i]).bits;
    std::memcpy(bytes.data() + 2 * i, &bits, 2);
  }
  return bytes;
}

SafetensorsTensorOut weights_tensor_out(const std::string& name, const std::vector<int64_t>& shape, const float* values,
                                        size_t count, SafetensorsDtype dtype, std::vector<std::vector<uint8_t>>& held) {
  if (dtype == SafetensorsDtype::F32)  // little-endian host (weights_bytes): the values' bytes are the file's
    return {name, dtype, shape, reinterpret_cast<const uint8_t*>(values), count * sizeof(float)};
  held.push_back(weights_bytes(values, count, dtype));
  return {name, dtype, shape, held.back().data(), held.back().size()};
}

}  // namespace ddp
