// parameter_registry.h: the model's parameters as named tensors in one flat
// layout.
//
// A model registers each tensor (PyTorch state_dict name, shape,
// initialiser, weight decay or not) in the order backward finishes its
// gradient; the registry places them one after the other in that order, so
// a run of consecutive tensors is a run of consecutive memory and an
// all-reduce bucket is a contiguous slice (comm/gradient_reducer.h). Every
// flat buffer (FP32 masters, FP16 weights, optimizer state, FP16 gradients)
// shares this layout, so the optimizer and the unscale/check pass stay
// single passes with one index.
//
// Each tensor starts at a multiple of kAlignElements: 16 bytes of FP16 (32
// of FP32), what cuBLASLt's bias and bias-gradient epilogues need of their
// pointer, so those fuse on every layer, not only on the one that happens
// to start at offset 0. The padding between tensors is zero in every buffer
// and stays zero: no gradient is written there, and zero gradients leave
// zero weights and zero optimizer state.
//
// Files hold tensors packed (back to back in registration order, no
// padding): pack()/unpack() convert, so a checkpoint does not depend on
// the alignment rule (and version 1 checkpoints, written before padding,
// read unchanged).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace ddp {

struct ParameterInit {
  enum class Kind { Zeros, Ones, Uniform, Normal };
  Kind kind = Kind::Zeros;
  float scale = 0.0f;  // Uniform: values in [-scale, scale); Normal: the standard deviation

  static ParameterInit zeros() { return {Kind::Zeros, 0.0f}; }
  static ParameterInit ones() { return {Kind::Ones, 0.0f}; }
  static ParameterInit uniform(float bound) { return {Kind::Uniform, bound}; }
  static ParameterInit normal(float stddev) { return {Kind::Normal, stddev}; }
};

struct ParameterTensor {
  std::string name;            // state_dict name, e.g. "0.weight"
  std::vector<int64_t> shape;  // PyTorch layout (nn.Linear: [out, in])
  size_t offset = 0;           // first element in the flat buffers (a multiple of kAlignElements)
  size_t count = 0;            // elements: the product of shape
  ParameterInit init;
  bool weight_decay = true;  // whether the optimizer's weight decay applies
  int init_order = 0;        // tensors draw their initial values in increasing init_order
  std::string file_stem;     // the .npy file name without ".npy" (weights_io.h); the name unless set
};

class ParameterRegistry {
 public:
  static constexpr size_t kAlignElements = 8;

  // Appends a tensor after the ones registered before it (it finishes its
  // gradient after them in backward). Returns its index. Names are unique;
  // every dimension is positive.
  size_t add(ParameterTensor tensor);

  const std::vector<ParameterTensor>& tensors() const { return tensors_; }
  const ParameterTensor& operator[](size_t i) const { return tensors_[i]; }
  size_t size() const { return tensors_.size(); }
  // The index of the tensor of that name, or size() when there is none.
  size_t find(const std::string& name) const;

  size_t flat_count() const { return flat_count_; }            // elements of each flat buffer, padding included
  size_t parameter_count() const { return parameter_count_; }  // the model's parameters, no padding

  // Flat buffer <-> tensors back to back (parameter_count() elements).
  std::vector<float> pack(const std::vector<float>& flat) const;
  std::vector<float> unpack(const std::vector<float>& packed) const;

  // Every tensor's initial values, deterministic from `seed` on every
  // platform: one random stream, drawn tensor by tensor in init_order, each
  // tensor's elements in order. Padding is zero.
  std::vector<float> initial_values(uint64_t seed) const;

 private:
  std::vector<ParameterTensor> tensors_;
  // name -> index: add() and find() stay O(1) for models of many layers (a
  // linear scan made a 100,000-layer GPT's registration quadratic: hours
  // before its memory could even be checked).
  std::unordered_map<std::string, size_t> index_;
  size_t flat_count_ = 0;
  size_t parameter_count_ = 0;
};

// An nn.Linear(in, out)'s tensors: `<prefix>.weight` [out, in] then
// `<prefix>.bias` [out], with PyTorch's initialisation (both uniform in
// +-1/sqrt(in)), drawn in init_order and init_order + 1; their .npy files
// `<file_stem_prefix>.weight` and `.bias` (the names when it is empty).
void register_linear_parameters(ParameterRegistry& registry, const std::string& prefix, int64_t in, int64_t out,
                                int init_order, const std::string& file_stem_prefix = "");

}  // namespace ddp
