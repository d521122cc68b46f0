// model_catalog.cpp: each function has a case per model (the MLP, the GPT).
#include "trainer/config/model_catalog.h"

#include "kernels/error.h"
#include "trainer/data/data_source.h"
#include "trainer/models/gpt_config.h"
#include "trainer/models/mlp_config.h"

namespace ddp {
namespace {
bool is_gpt(const TrainConfig& c) { return c.model == "gpt"; }
}  // namespace

ParameterRegistry model_parameters(const TrainConfig& c) {
  return is_gpt(c) ? gpt_parameters(c.gpt) : mlp_parameters(c.mlp);
}

std::vector<int64_t> model_dims(const TrainConfig& c) { return is_gpt(c) ? gpt_dims(c.gpt) : mlp_dims(c.mlp); }

// The GPT's activation is fixed (GPT-2's tanh GELU); a checkpoint records it like the MLP's.
std::string model_activation_name(const TrainConfig& c) { return is_gpt(c) ? "gelu-tanh" : c.mlp.activation_name; }
std::string model_kind_name(const TrainConfig& c) { return is_gpt(c) ? "gpt" : "mlp"; }

std::string model_summary(const TrainConfig& c) {
  if (is_gpt(c)) return "GPT " + gpt_shape_text(c.gpt);
  return "MLP " + mlp_widths_text(mlp_dims(c.mlp)) + " " + c.mlp.activation_name;
}

std::string model_shape_text(const TrainConfig& c) {
  if (is_gpt(c))
    return "gpt-l" + std::to_string(c.gpt.n_layer) + "-h" + std::to_string(c.gpt.n_head) + "-c" +
           std::to_string(c.gpt.n_embd) + "-t" + std::to_string(c.gpt.block_size) + "-v" +
           std::to_string(c.gpt.vocab_size);
  return mlp_widths_text(mlp_dims(c.mlp));
}

double model_flops_per_sample(const TrainConfig& c) {
  if (is_gpt(c)) return gpt_flops_per_token(c.gpt) * c.gpt.block_size;
  return mlp_flops_per_sample(mlp_dims(c.mlp));
}

int64_t model_tokens_per_sample(const TrainConfig& c) { return is_gpt(c) ? c.gpt.block_size : 0; }
int64_t model_input_width(const TrainConfig& c) { return is_gpt(c) ? c.gpt.block_size : mlp_dims(c.mlp).front(); }
int64_t model_output_width(const TrainConfig& c) { return is_gpt(c) ? c.gpt.vocab_size : mlp_dims(c.mlp).back(); }

TrainConfig bind_model_to_data(TrainConfig c, const TrainTestData& data) {
  if (!is_gpt(c)) return c;
  if (!data.train.is_token_data())
    throw Error("--model gpt needs token data (--data text): " + data.train.source + " holds features");
  c.gpt.block_size = static_cast<int>(data.train.tokens_per_sample);
  c.gpt.vocab_size = data.train.vocab_size;
  c.gpt.real_vocab = data.train.real_vocab_size > 0 ? data.train.real_vocab_size : data.train.vocab_size;
  return c;
}

void check_model_matches_data(const TrainConfig& c, const TrainTestData& data) {
  if (is_gpt(c)) check_gpt_matches_data(c.gpt, data);
  else check_mlp_matches_data(c.mlp, c.loss, data);
}

}  // namespace ddp
