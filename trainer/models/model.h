// model.h: what the trainer, the evaluator and the reducer know of a model.
//
// A model declares its parameters as named tensors (parameter_registry.h)
// and computes, on a Backend, in FP16 with FP32 sums (DESIGN.md):
//   forward   a batch (FP16 features or int32 token ids) to FP16 outputs,
//             one row per prediction: [batch rows, classes] for the MLP,
//             [batch rows x T, vocabulary] for a language model;
//   the loss  over those outputs and the batch's targets, in FP32, and its
//             gradient scaled by S into output_grad() (loss_head.h: shared
//             by every model, so a model adds no loss code);
//   backward  from output_grad() into the FP16 gradients,
//             reporting each group of parameter tensors whose gradients
//             are final as soon as they are written (queued, on a device),
//             so the all-reduce of a finished bucket starts while backward
//             goes on below it.
// Parameters and gradients are buffers the caller owns (parameter_store.h),
// reached through tables of one pointer per registry tensor
// (tensor_table.h); a model owns only its activations and scratch.
//
// Layer hooks: a point before each layer's forward and before its backward
// (layer = the model's unit of parameters, e.g. one Linear), where sharded
// training gathers that layer's parameters before they are read. A hook
// may re-point the table entries of that layer's tensors (layer_tensors):
// a model reads an entry at each use, after the hook, and keeps none
// across a hook.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "kernels/error.h"
#include "kernels/half.h"
#include "kernels/step_status.h"
#include "trainer/data/batch_loader.h"
#include "trainer/report/activation_bytes.h"
#include "trainer/params/parameter_registry.h"
#include "trainer/params/tensor_table.h"

namespace ddp {

struct ModelOutput {
  const lowp16* values = nullptr;  // [rows, width] FP16, valid until the next forward
  int rows = 0;                    // predictions (each has one target)
  int width = 0;                   // classes, or regression targets per prediction
  // Classes among the width (a language model's vocabulary padded for the
  // GEMMs: columns >= classes never win); 0: all of them.
  int classes = 0;
};

// Registry tensors [first, end) have final gradients.
using GradientsReady = std::function<void(size_t first_tensor, size_t end_tensor)>;

struct LayerHooks {
  std::function<void(int layer)> before_forward;   // may be empty
  std::function<void(int layer)> before_backward;  // may be empty
};

class Model {
 public:
  virtual ~Model() = default;

  virtual const ParameterRegistry& parameters() const = 0;
  virtual int max_batch() const = 0;  // batch rows forward accepts
  virtual int layer_count() const = 0;
  // The registry tensors layer `layer` (0 <= layer < layer_count()) reads
  // or writes the gradient of, in registry order: what its hooks must make
  // available. A tensor may belong to more than one layer (the GPT's tied
  // wte); every tensor belongs to at least one.
  virtual std::vector<size_t> layer_tensors(int layer) const = 0;
  // Output rows per batch row: 1 for the MLP, T for a language model.
  virtual int outputs_per_sample() const { return 1; }

  // weights_lowp: one entry per registry tensor (tensor_table.h). The
  // tables are taken by reference and never copied, so what a layer hook
  // set()s in the caller's table is what the layer after it reads.
  virtual ModelOutput forward(const DeviceBatch& batch, const WeightTable& weights_lowp) = 0;
  // forward()'s outputs handed to `each` in blocks of rows, in order, each
  // valid until `each` returns: for a caller that reads them once (the
  // evaluator's loss), so a model whose outputs are large need hold only a
  // block (the GPT's head with --classifier-logits drop). By default one
  // block: forward() itself.
  using OutputRows = std::function<void(const ModelOutput& part, int first_row)>;
  virtual void forward_rows(const DeviceBatch& batch, const WeightTable& weights_lowp, const OutputRows& each) {
    each(forward(batch, weights_lowp), 0);
  }
  // Scratch for the loss gradient of the last forward's outputs [rows, width]
  // (it may be the outputs' own memory: a loss gradient may overwrite them).
  virtual lowp16* output_grad() = 0;
  // A model whose last layer computes its cross-entropy with its outputs
  // (the GPT's chunked classifier, tied_classifier.h), so the outputs and
  // their gradient are never all held twice: training calls
  // forward_with_loss instead of forward() and the loss head.
  virtual bool fuses_loss() const { return false; }
  // Forward, the mean cross-entropy against batch.labels into *loss_mean
  // (backend memory) and its gradient times `scale` into output_grad(), as
  // forward(), loss_forward and loss_backward (loss_head.h) give them.
  virtual void forward_with_loss(const DeviceBatch& /*batch*/, const WeightTable& /*weights_lowp*/, ScalarArg /*scale*/,
                                 float* /*loss_mean*/) {
    throw Error("this model does not compute its loss itself");
  }
  // Backward of the last forward from output_grad(). Writes (accumulate =
  // false) or adds to (accumulate = true) the gradients grads_lowp points
  // to. `ready`, if given, runs once for each group of tensors as their
  // gradients become final, in registry order, covering every tensor.
  virtual void backward(const WeightTable& weights_lowp, const GradTable& grads_lowp, bool accumulate,
                        const GradientsReady& ready) = 0;
  // What the model's own buffers hold, by kind, with a formula per kind
  // (activation_bytes.h); empty where a model states none.
  virtual ActivationKinds activation_kinds() const { return {}; }

  void set_layer_hooks(LayerHooks hooks) { hooks_ = std::move(hooks); }
  // Observers (--trace) at the same points: `done` before the hooks (the
  // previous layer's work ends there), `started` after them (the layer's
  // own work starts after its gather), so a layer's span holds no gather.
  struct LayerObservers {
    std::function<void()> done;  // may be empty
    LayerHooks started;
  };
  void set_layer_observers(LayerObservers observers) { observers_ = std::move(observers); }

 protected:
  void before_forward(int layer) const {
    if (observers_.done) observers_.done();
    if (hooks_.before_forward) hooks_.before_forward(layer);
    if (observers_.started.before_forward) observers_.started.before_forward(layer);
  }
  void before_backward(int layer) const {
    if (observers_.done) observers_.done();
    if (hooks_.before_backward) hooks_.before_backward(layer);
    if (observers_.started.before_backward) observers_.started.before_backward(layer);
  }

 private:
  LayerHooks hooks_;
  LayerObservers observers_;
};

}  // namespace ddp
