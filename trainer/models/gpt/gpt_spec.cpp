// gpt_spec.cpp: the GPT as the model table describes it.
#include "trainer/models/gpt/gpt_spec.h"

#include <utility>

#include "kernels/error.h"
#include "trainer/data/data_source.h"
#include "trainer/models/gpt/gpt_model.h"

namespace ddp {
namespace {

// The GPT's activation is fixed (GPT-2's tanh GELU); a checkpoint records it like the MLP's.
std::string activation_name(const GptConfig&) { return "gelu-tanh"; }
std::string summary(const GptConfig& g) { return "GPT " + gpt_shape_text(g); }
std::string shape_text(const GptConfig& g) {
  return "gpt-l" + std::to_string(g.n_layer) + "-h" + std::to_string(g.n_head) + "-c" + std::to_string(g.n_embd) +
         "-t" + std::to_string(g.block_size) + "-v" + std::to_string(g.vocab_size);
}
double flops_per_sample(const GptConfig& g) { return gpt_flops_per_token(g) * g.block_size; }
int64_t window_length(const GptConfig& g) { return g.block_size; }
int64_t vocabulary(const GptConfig& g) { return g.vocab_size; }
TokenShape gpt_token_shape(const GptConfig& g) { return TokenShape{g.block_size, g.vocab_size, g.real_vocab}; }
void set_token_shape(GptConfig& g, const TokenShape& t) {
  g.block_size = t.context;
  g.vocab_size = t.vocab_size;
  g.real_vocab = t.real_vocab;
}

std::string settings_problem(const GptConfig& g) {
  const std::pair<const char*, int> sizes[] = {
      {"--n-layer", g.n_layer}, {"--n-head", g.n_head}, {"--n-embd", g.n_embd}};
  for (const auto& s : sizes)
    if (s.second <= 0) return std::string(s.first) + " must be positive";
  if (g.n_embd % g.n_head != 0)
    return "--n-embd " + std::to_string(g.n_embd) + " does not divide by --n-head " + std::to_string(g.n_head) +
           " (each head is n_embd / n_head wide)";
  if (g.classifier_chunk < 0)
    return "--classifier-chunk " + std::to_string(g.classifier_chunk) + " must be 0 (unchunked) or a row count";
  if (g.classifier_logits == ClassifierLogits::Drop && g.classifier_chunk == 0)
    return "--classifier-logits drop needs --classifier-chunk ROWS (the logits are dropped a chunk at a time)";
  return "";
}

// gpt_dims' order: n_layer, n_head, n_embd, block_size, vocab_size, real_vocab.
void from_dims(GptConfig& g, const std::vector<int64_t>& d) {
  g.n_layer = static_cast<int>(d[0]);
  g.n_head = static_cast<int>(d[1]);
  g.n_embd = static_cast<int>(d[2]);
  set_token_shape(g, TokenShape{static_cast<int>(d[3]), static_cast<int>(d[4]), static_cast<int>(d[5])});
}

// The context is the data's window length; the vocabulary the data's
// (padded for the GEMMs), with the tokenizer's real size beside it.
void bind_to_data(GptConfig& g, const TrainTestData& data) {
  if (!data.train.is_token_data())
    throw Error("--model gpt needs token data (--data text): " + data.train.source + " holds features");
  g.block_size = static_cast<int>(data.train.tokens_per_sample);
  g.vocab_size = data.train.vocab_size;
  g.real_vocab = data.train.real_vocab_size > 0 ? data.train.real_vocab_size : data.train.vocab_size;
}

void check_data(const GptConfig& g, LossKind, const TrainTestData& data) { check_gpt_matches_data(g, data); }

std::unique_ptr<Model> make(const GptConfig& g, Backend& backend, int max_batch) {
  return std::make_unique<GptModel>(backend, g, max_batch);
}

ModelSpec<GptConfig> build_spec() {
  ModelSpec<GptConfig> s;
  s.kind = ModelKind{"gpt", gpt_dims_problem, {"gelu-tanh"}};
  s.token_shape = gpt_token_shape;
  s.set_token_shape = set_token_shape;
  s.flags = {{"n-layer", ""},   {"n-head", ""},           {"n-embd", ""},           {"recompute", ""},
             {"attention", ""}, {"classifier-chunk", ""}, {"classifier-logits", ""}};
  s.settings_problem = settings_problem;
  s.parameters = gpt_parameters;
  s.dims = gpt_dims;
  s.from_dims = from_dims;
  s.dim_flags = {{"n-layer", "layers"},
                 {"n-head", "heads"},
                 {"n-embd", "channels"},
                 {"block-size", "positions"},
                 {"vocab-size", "classes"}};
  s.activation_name = activation_name;
  s.summary = summary;
  s.shape_text = shape_text;
  s.flops_per_sample = flops_per_sample;
  s.tokens_per_sample = window_length;
  s.input_width = window_length;
  s.output_width = vocabulary;
  s.bind_to_data = bind_to_data;
  s.check_data = check_data;
  s.make = make;
  return s;
}

}  // namespace

const ModelSpec<GptConfig>& gpt_spec() {
  static const ModelSpec<GptConfig> spec = build_spec();
  return spec;
}

}  // namespace ddp
