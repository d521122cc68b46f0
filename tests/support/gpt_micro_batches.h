// gpt_micro_batches.h: a GPT driven directly on a Backend for two
// micro-batches (the second accumulating), then an evaluation forward:
// what the bitwise tests of its run settings (--recompute,
// --classifier-chunk, on the CPU and on CUDA) compare between settings.
#pragma once

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/buffer.h"
#include "kernels/half.h"
#include "kernels/lowp_codec.h"
#include "support/test_support.h"
#include "trainer/models/gpt/gpt_model.h"
#include "trainer/models/loss_head.h"

namespace ddp::test {

struct GptStepInputs {
  std::vector<lowp16> weights;     // the registry's flat 16-bit weights
  std::vector<int32_t> tokens[2];  // per micro-batch [batch x T]
  std::vector<int32_t> labels[2];
};

// Weights normal(0, 0.15) (LayerNorm gains about 1) in `precision`'s
// format (the backend's that will read them), then per micro-batch its
// tokens and labels: `rows` = batch x T each, below real_vocab.
inline GptStepInputs draw_gpt_step_inputs(std::mt19937_64& rng, const ParameterRegistry& reg, size_t rows,
                                          int real_vocab, Precision precision = Precision::Fp16) {
  GptStepInputs in;
  std::normal_distribution<float> normal(0.0f, 0.15f);
  with_codec(precision, [&](auto codec) {
    in.weights.assign(reg.flat_count(), codec.narrow(0.0f));
    for (const ParameterTensor& t : reg.tensors()) {
      const bool gain = t.name.find("ln_") != std::string::npos && t.name.find(".weight") != std::string::npos;
      for (size_t i = 0; i < t.count; ++i) in.weights[t.offset + i] = codec.narrow((gain ? 1.0f : 0.0f) + normal(rng));
    }
  });
  for (int m = 0; m < 2; ++m) {
    in.tokens[m] = random_labels(rng, rows, real_vocab);
    in.labels[m] = random_labels(rng, rows, real_vocab);
  }
  return in;
}

struct GptStepOutcome {
  std::vector<float> losses;    // per micro-batch
  std::vector<lowp16> grads;    // after both, accumulated
  std::vector<lowp16> logits;   // an evaluation forward's, after them
  size_t train_peak_bytes = 0;  // the allocation tally's peak before that forward
};

// Each micro-batch through forward_with_loss where the model fuses its
// loss (the chunked classifier), else forward and the loss head; the
// gradients poisoned first, then written and accumulated.
inline GptStepOutcome run_gpt_micro_batches(Backend& backend, GptModel& model, int batch, int context,
                                            const GptStepInputs& in) {
  const ParameterRegistry& reg = model.parameters();
  Buffer<lowp16> w(backend, reg.flat_count()), grads(backend, reg.flat_count());
  w.upload(in.weights);
  grads.upload(poison_halves(reg.flat_count()));
  const WeightTable weights = WeightTable::flat(w.data(), reg);
  const size_t rows = static_cast<size_t>(batch) * context;
  Buffer<int32_t> tokens(backend, rows), labels(backend, rows);
  Buffer<float> loss(backend, 1);
  GptStepOutcome o;
  for (int m = 0; m < 2; ++m) {
    tokens.upload(in.tokens[m]);
    labels.upload(in.labels[m]);
    DeviceBatch step;
    step.token_ids = tokens.data();
    step.labels = labels.data();
    step.rows = batch;
    step.labels_per_row = context;
    const ScalarArg scale(512.0f);
    if (model.fuses_loss()) {
      model.forward_with_loss(step, weights, scale, loss.data());
    } else {
      const ModelOutput out = model.forward(step, weights);
      loss_forward(backend, LossKind::SoftmaxCrossEntropy, out, step, loss.data(), nullptr);
      loss_backward(backend, LossKind::SoftmaxCrossEntropy, out, step, scale, model.output_grad());
    }
    o.losses.push_back(loss.download()[0]);
    model.backward(weights, GradTable::flat(grads.data(), reg), /*accumulate=*/m > 0, GradientsReady());
  }
  o.grads = grads.download();
  o.train_peak_bytes = backend.allocations().peak_bytes;
  DeviceBatch eval;
  eval.token_ids = tokens.data();
  eval.rows = batch;
  const ModelOutput out = model.forward(eval, weights);
  o.logits.resize(static_cast<size_t>(out.rows) * out.width);
  backend.copy_to_host(o.logits.data(), out.values, o.logits.size() * sizeof(lowp16));
  return o;
}

inline bool same_halves(const std::vector<lowp16>& a, const std::vector<lowp16>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(lowp16)) == 0;
}

}  // namespace ddp::test
