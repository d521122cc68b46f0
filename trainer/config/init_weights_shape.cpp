// init_weights_shape.cpp
#include "trainer/config/init_weights_shape.h"

#include <cstdio>

#include "kernels/error.h"
#include "trainer/checkpoint/hf_gpt2.h"
#include "trainer/config/model_table.h"

namespace ddp {
namespace {

bool given(const TrainConfig& c, const char* flag) { return c.given_flags.count(flag) > 0; }

void take(TrainConfig& c, const char* flag, int& setting, int value, const std::string& source, const char* key) {
  if (given(c, flag) && setting != value)
    throw Error(std::string("--") + flag + " " + std::to_string(setting) + " disagrees with " + source + " (" + key +
                " " + std::to_string(value) + "): the shape comes from the weights, drop the flag");
  setting = value;
}

}  // namespace

std::string bind_to_init_weights_shape(TrainConfig& c) {
  if (c.model != "gpt" || c.init_weights_dir.empty() || !is_hf_gpt2_weights(c.init_weights_dir)) return "";
  const HfGpt2Config hf = read_hf_gpt2_config(c.init_weights_dir);
  if (hf.n_head == 0 && !given(c, "n-head"))
    throw Error("--init-weights " + c.init_weights_dir +
                ": a bare model.safetensors does not say n_head: give --n-head, or the directory with its config.json");
  take(c, "n-layer", c.gpt.n_layer, hf.n_layer, hf.source, "n_layer");
  if (hf.n_head > 0) take(c, "n-head", c.gpt.n_head, hf.n_head, hf.source, "n_head");
  take(c, "n-embd", c.gpt.n_embd, hf.n_embd, hf.source, "n_embd");
  const bool generating = given(c, "generate");
  if (!given(c, "block-size") && generating) c.data.block_size = hf.n_positions;
  if (c.data.block_size > hf.n_positions)
    throw Error("--block-size " + std::to_string(c.data.block_size) + " is above " + hf.source + "'s n_positions " +
                std::to_string(hf.n_positions) + " (the positions its wpe has)");
  // The checks and the context the flags' reading made, again on the weights' shape.
  const ModelRow& row = model_row(c.model);
  const std::string problem = row.settings_problem(c);
  if (!problem.empty()) throw Error(problem + " (" + hf.source + ")");
  TokenShape shape = row.token_shape(c);
  shape.context = static_cast<int>(c.data.block_size);
  row.set_token_shape(c, shape);
  std::string note = "initial weights: Hugging Face GPT-2 (" + std::to_string(hf.n_layer) + " layers, " +
                     std::to_string(c.gpt.n_head) + " heads, " + std::to_string(hf.n_embd) + " wide, " +
                     std::to_string(hf.n_positions) + " positions, vocabulary " + std::to_string(hf.vocab_size) + ")";
  if (hf.dropout > 0) {
    char dropout[32];
    std::snprintf(dropout, sizeof dropout, "%g", hf.dropout);
    note += "; its dropout " + std::string(dropout) + " is not applied (ddp_train trains without dropout)";
  }
  return note;
}

}  // namespace ddp
