// flags_model.cpp: the model flags: the MLP's
// (trainer/models/mlp/mlp_config.h), the GPT's
// (trainer/models/gpt/gpt_config.h), --model and --loss. Their checks are
// the model table's (a model's settings_problem; a next-token model's data
// and loss), not a case per model.
#include "launch/cli/flag_groups.h"

#include "kernels/error.h"
#include "trainer/config/config_check.h"
#include "trainer/config/model_table.h"
#include "trainer/models/layers/attention_path.h"
#include "trainer/models/layers/classifier_logits.h"
#include "trainer/models/layers/recompute.h"
#include "trainer/models/mlp/mlp_config.h"

namespace po = boost::program_options;

namespace ddp {

po::options_description model_flags(FlagText& t) {
  po::options_description model("Model");
  // One flag per row, as --help lists them.
  // clang-format off
  model.add_options()
      ("layers", po::value(&t.layers)->default_value(t.layers), "widths: input,hidden...,output (synthetic data: 10,10)")
      ("activation", po::value(&t.activation)->default_value(t.activation), "relu | gelu")
      ("loss", po::value(&t.loss)->default_value(t.loss), "xent | mse (synthetic data: mse)");
  // clang-format on
  return model;
}

po::options_description gpt_flags(TrainConfig& c, FlagText& t) {
  po::options_description gpt("GPT (--model gpt: nanoGPT's GPT-2 architecture)");
  // One flag per row, as --help lists them.
  // clang-format off
  gpt.add_options()
      ("model", po::value(&c.model)->default_value(c.model), "mlp | gpt (gpt needs --data text, or --bench: random token windows)")
      ("n-layer", po::value(&c.gpt.n_layer)->default_value(c.gpt.n_layer), "transformer blocks")
      ("n-head", po::value(&c.gpt.n_head)->default_value(c.gpt.n_head), "attention heads (must divide --n-embd)")
      ("n-embd", po::value(&c.gpt.n_embd)->default_value(c.gpt.n_embd), "channels C of the residual stream")
      ("block-size", po::value(&c.data.block_size)->default_value(c.data.block_size),
       "tokens of context T: samples are windows of T+1 tokens at stride T")
      ("vocab-size", po::value(&c.data.vocab_size)->default_value(c.data.vocab_size),
       "the model's vocabulary, at least the tokens' (0: from the data: 256 for bytes, GPT-2's 50257 padded to "
       "50304 for llm.c and raw-u16 files)")
      ("classifier-chunk", po::value(&c.gpt.classifier_chunk)->default_value(c.gpt.classifier_chunk),
       "the LM head and its cross-entropy in chunks of ROWS positions, the gradient written over the logits: one FP16 "
       "[B*T, vocab] buffer instead of two, no FP32 one (0: unchunked; the same bits on the CPU)")
      ("classifier-logits", po::value(&t.classifier_logits)->default_value(t.classifier_logits),
       "with --classifier-chunk: keep (the chunks' gradients stay in the [B*T, vocab] buffer for backward) or drop "
       "(each chunk's backward runs in forward, dx into [B*T, C] and d_wte summed in FP32 [vocab, C]: one chunk of "
       "logits exists, not [B*T, vocab]; the loss and dx keep's bits, d_wte within an FP16 bit)")
      ("recompute", po::value(&t.recompute)->default_value(t.recompute),
       "activations backward computes again instead of keeping, the same bits at every level: none (each block "
       "keeps all it reads), light (each block keeps x, m and the attention's q, k, v, P; the LayerNorms and the "
       "MLP's hidden run again) or block (each block keeps its input x only and runs its forward again)")
      ("attention", po::value(&t.attention)->default_value(t.attention),
       "explicit (the [B, heads, T, T] scores and their softmax kept for backward: the reference), fused "
       "(FlashAttention's tiles: each query row's output and log-sum-exp kept, no T x T buffer; within an FP16 "
       "tolerance of explicit) or auto (the one measured faster on the device: explicit on CPUs, and on CUDA "
       "until measured there)");
  // clang-format on
  return gpt;
}

void apply_model_flags(const po::variables_map& vm, FlagText& t, const BenchOptions& bench, TrainConfig& c) {
  if (c.data.kind == "synthetic") {  // the seed problem: Linear(10,10) regression
    if (vm["layers"].defaulted()) t.layers = "10,10";
    if (vm["loss"].defaulted()) t.loss = "mse";
  }
  set_mlp_options(c.mlp, t.layers, t.activation);
  c.gpt.recompute = parse_recompute(t.recompute);  // throws naming --recompute
  c.gpt.attention = parse_attention_path(t.attention);  // throws naming --attention
  c.gpt.classifier_logits = parse_classifier_logits(t.classifier_logits);  // throws naming --classifier-logits
  const ModelRow& row = model_row(c.model);        // throws naming the models there are
  const std::string problem = row.settings_problem(c);
  if (!problem.empty()) throw Error(problem);
  if (row.token_shape) {  // a next-token model: token windows in, the next token's cross-entropy
    // --generate reads no data: the shape comes from its checkpoint or the
    // flags. Its own flags without it are refused later, naming it.
    const bool generation_flags =
        vm.count("generate") || vm.count("prompt") || !vm["temperature"].defaulted() || !vm["top-k"].defaulted();
    // --bench draws random token windows of the flags' shape instead.
    if (c.data.kind != "text" && !generation_flags && !bench.enabled)
      throw Error("--model " + c.model + " needs --data text (token windows) or --bench; --data is " + c.data.kind);
    if (vm["loss"].defaulted()) t.loss = "xent";
    if (t.loss != "xent") throw Error("--model " + c.model + ": --loss must be xent (the next token's cross-entropy)");
    TokenShape shape = row.token_shape(c);
    shape.context = static_cast<int>(c.data.block_size);
    row.set_token_shape(c, shape);
  }
  if (t.loss == "xent")
    c.loss = LossKind::SoftmaxCrossEntropy;
  else if (t.loss == "mse")
    c.loss = LossKind::MeanSquaredError;
  else
    throw Error("--loss: '" + t.loss + "' is not one of xent, mse");
  c.loss_name = t.loss;
}

}  // namespace ddp
