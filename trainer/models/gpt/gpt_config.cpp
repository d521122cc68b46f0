// gpt_config.cpp
#include "trainer/models/gpt/gpt_config.h"

#include <cmath>
#include <limits>

#include "kernels/error.h"
#include "trainer/data/data_source.h"

namespace ddp {
namespace {

// One tensor of the GPT: nanoGPT's initialisation, decay by rank.
void add(ParameterRegistry& r, const std::string& name, std::vector<int64_t> shape, ParameterInit init,
         int init_order) {
  ParameterTensor t;
  t.name = name;
  t.weight_decay = shape.size() >= 2;
  t.shape = std::move(shape);
  t.init = init;
  t.init_order = init_order;
  r.add(std::move(t));
}

// A Linear's weight [out, in] then bias [out], consecutive in the registry.
void add_linear(ParameterRegistry& r, const std::string& prefix, int64_t in, int64_t out, float stddev,
                int init_order) {
  add(r, prefix + ".weight", {out, in}, ParameterInit::normal(stddev), init_order);
  add(r, prefix + ".bias", {out}, ParameterInit::zeros(), init_order + 1);
}

void add_layernorm(ParameterRegistry& r, const std::string& prefix, int64_t c, int init_order) {
  add(r, prefix + ".weight", {c}, ParameterInit::ones(), init_order);
  add(r, prefix + ".bias", {c}, ParameterInit::zeros(), init_order + 1);
}

constexpr int kTensorsPerBlock = 12;

}  // namespace

std::string gpt_block_prefix(int layer) { return "transformer.h." + std::to_string(layer) + "."; }

ParameterRegistry gpt_parameters(const GptConfig& g) {
  DDP_REQUIRE(
      g.n_layer > 0 && g.n_head > 0 && g.n_embd > 0 && g.n_embd % g.n_head == 0 && g.block_size > 0 && g.vocab_size > 0,
      "gpt_parameters: a bound, valid GPT config");
  const int64_t c = g.n_embd;
  const float std_all = 0.02f;
  const float std_proj = static_cast<float>(0.02 / std::sqrt(2.0 * g.n_layer));
  // init_order: forward order (wte 0, wpe 1, block i from 2 + 12 i, ln_f last).
  ParameterRegistry r;
  const int ln_f_order = 2 + kTensorsPerBlock * g.n_layer;
  add_layernorm(r, "transformer.ln_f", c, ln_f_order);
  for (int i = g.n_layer - 1; i >= 0; --i) {
    const std::string p = gpt_block_prefix(i);
    const int o = 2 + kTensorsPerBlock * i;  // ln_1 o, c_attn o+2, attn.c_proj o+4, ln_2 o+6, c_fc o+8, mlp.c_proj o+10
    add_linear(r, p + "mlp.c_proj", 4 * c, c, std_proj, o + 10);
    add_linear(r, p + "mlp.c_fc", c, 4 * c, std_all, o + 8);
    add_layernorm(r, p + "ln_2", c, o + 6);
    add_linear(r, p + "attn.c_proj", c, c, std_proj, o + 4);
    add_linear(r, p + "attn.c_attn", c, 3 * c, std_all, o + 2);
    add_layernorm(r, p + "ln_1", c, o);
  }
  add(r, "transformer.wpe.weight", {g.block_size, c}, ParameterInit::normal(std_all), 1);
  add(r, "transformer.wte.weight", {g.vocab_size, c}, ParameterInit::normal(std_all), 0);
  return r;
}

std::vector<int64_t> gpt_dims(const GptConfig& g) {
  return {g.n_layer, g.n_head, g.n_embd, g.block_size, g.vocab_size, g.real_vocab};
}

std::string gpt_dims_problem(const std::vector<int64_t>& d, uint64_t& count) {
  if (d.size() != 6)
    return "GPT dims hold " + std::to_string(d.size()) +
           " values (n_layer, n_head, n_embd, block_size, vocab_size, real_vocab)";
  const char* names[] = {"n_layer", "n_head", "n_embd", "block_size", "vocab_size", "real_vocab"};
  constexpr int64_t kMaxDim = int64_t{1} << 24;  // beyond any model; keeps the products below in range
  for (size_t i = 0; i < d.size(); ++i)
    if (d[i] <= 0 || d[i] > kMaxDim)
      return std::string(names[i]) + " is " + std::to_string(d[i]) + " (must be in [1, 2^24])";
  if (d[2] % d[1] != 0) return "n_embd " + std::to_string(d[2]) + " does not divide by n_head " + std::to_string(d[1]);
  if (d[5] > d[4]) return "real_vocab " + std::to_string(d[5]) + " is above vocab_size " + std::to_string(d[4]);
  const uint64_t c = static_cast<uint64_t>(d[2]);
  const uint64_t per_block =
      12 * c * c + 13 * c;  // c_attn 3c^2+3c, attn.c_proj c^2+c, c_fc 4c^2+4c, mlp.c_proj 4c^2+c, 2 LN 4c
  const uint64_t total =
      per_block * static_cast<uint64_t>(d[0]) + 2 * c + (static_cast<uint64_t>(d[3]) + static_cast<uint64_t>(d[4])) * c;
  if (total > (uint64_t{1} << 40)) return "the GPT dims imply more than 2^40 parameters";
  count = total;
  return "";
}

std::string gpt_shape_text(const GptConfig& g) {
  return std::to_string(g.n_layer) + " layers, " + std::to_string(g.n_head) + " heads, " + std::to_string(g.n_embd) +
         " wide, context " + std::to_string(g.block_size) + ", vocabulary " + std::to_string(g.real_vocab) +
         (g.vocab_size != g.real_vocab ? " (padded to " + std::to_string(g.vocab_size) + ")" : "");
}

double gpt_flops_per_token(const GptConfig& g) {
  const double c = g.n_embd;
  const double params_no_wpe = g.n_layer * (12 * c * c + 13 * c) + 2 * c + g.vocab_size * c;
  return 6.0 * params_no_wpe + 12.0 * g.n_layer * g.block_size * c;
}

void check_gpt_matches_data(const GptConfig& g, const TrainTestData& data) {
  for (const Dataset* d : {&data.train, &data.test}) {
    if (!d->is_token_data())
      throw Error("--model gpt needs token data (--data text): " + d->source + " holds features");
    if (static_cast<int>(d->tokens_per_sample) != g.block_size)
      throw Error("--model gpt: " + d->source + " holds windows of " + std::to_string(d->tokens_per_sample) +
                  " tokens, the model's --block-size is " + std::to_string(g.block_size));
    if (d->vocab_size > g.vocab_size)
      throw Error("--model gpt: " + d->source + " has a vocabulary of " + std::to_string(d->vocab_size) +
                  ", the model's is " + std::to_string(g.vocab_size));
  }
}

}  // namespace ddp
