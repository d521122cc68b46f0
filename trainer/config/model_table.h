// model_table.h: the one table of models. Each row is a model's own spec
// (models/<name>/<name>_spec.h) bound to the member of TrainConfig that
// holds its settings; the catalog (model_catalog.h), the factory
// (model_factory.h), checkpoint validation (through the kinds it
// registers, checkpoint/model_kinds.h) and --bench read it, so none of
// them has a case per model.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "trainer/config/train_config.h"
#include "trainer/models/model_spec.h"

namespace ddp {

// A model's spec over the whole config.
struct ModelRow {
  ModelKind kind;
  std::function<TokenShape(const TrainConfig&)> token_shape;             // empty: it reads features
  std::function<void(TrainConfig&, const TokenShape&)> set_token_shape;  // with token_shape
  std::vector<ModelFlag> flags;
  std::function<std::string(const TrainConfig&)> settings_problem;
  std::function<ParameterRegistry(const TrainConfig&)> parameters;
  std::function<std::vector<int64_t>(const TrainConfig&)> dims;
  std::function<void(TrainConfig&, const std::vector<int64_t>&)> from_dims;  // empty: none
  std::vector<DimFlag> dim_flags;
  std::function<std::string(const TrainConfig&)> activation_name;
  std::function<std::string(const TrainConfig&)> summary;
  std::function<std::string(const TrainConfig&)> shape_text;
  std::function<double(const TrainConfig&)> flops_per_sample;
  std::function<int64_t(const TrainConfig&)> tokens_per_sample;
  std::function<int64_t(const TrainConfig&)> input_width;
  std::function<int64_t(const TrainConfig&)> output_width;
  std::function<TrainConfig(TrainConfig, const TrainTestData&)> bind_to_data;
  std::function<void(const TrainConfig&, const TrainTestData&)> check_data;
  std::function<std::unique_ptr<Model>(const TrainConfig&, Backend&, int max_batch)> make;

  bool reads_flag(const std::string& flag) const {
    for (const ModelFlag& f : flags)
      if (f.flag == flag) return true;
    return false;
  }
};

// The row of a spec whose settings are TrainConfig's member `settings`.
template <class Settings>
ModelRow bind_model(const ModelSpec<Settings>& spec, Settings TrainConfig::*settings) {
  const ModelSpec<Settings>* s = &spec;  // specs are function-local statics: they outlive the table
  ModelRow row;
  row.kind = s->kind;
  row.flags = s->flags;
  row.dim_flags = s->dim_flags;
  if (s->token_shape != nullptr) {
    row.token_shape = [s, settings](const TrainConfig& c) { return s->token_shape(c.*settings); };
    row.set_token_shape = [s, settings](TrainConfig& c, const TokenShape& t) { s->set_token_shape(c.*settings, t); };
  }
  row.settings_problem = [s, settings](const TrainConfig& c) {
    return s->settings_problem != nullptr ? s->settings_problem(c.*settings) : std::string();
  };
  if (s->from_dims != nullptr)
    row.from_dims = [s, settings](TrainConfig& c, const std::vector<int64_t>& d) { s->from_dims(c.*settings, d); };
  row.parameters = [s, settings](const TrainConfig& c) { return s->parameters(c.*settings); };
  row.dims = [s, settings](const TrainConfig& c) { return s->dims(c.*settings); };
  row.activation_name = [s, settings](const TrainConfig& c) { return s->activation_name(c.*settings); };
  row.summary = [s, settings](const TrainConfig& c) { return s->summary(c.*settings); };
  row.shape_text = [s, settings](const TrainConfig& c) { return s->shape_text(c.*settings); };
  row.flops_per_sample = [s, settings](const TrainConfig& c) { return s->flops_per_sample(c.*settings); };
  row.tokens_per_sample = [s, settings](const TrainConfig& c) { return s->tokens_per_sample(c.*settings); };
  row.input_width = [s, settings](const TrainConfig& c) { return s->input_width(c.*settings); };
  row.output_width = [s, settings](const TrainConfig& c) { return s->output_width(c.*settings); };
  row.bind_to_data = [s, settings](TrainConfig c, const TrainTestData& data) {
    if (s->bind_to_data != nullptr) s->bind_to_data(c.*settings, data);
    return c;
  };
  row.check_data = [s, settings](const TrainConfig& c, const TrainTestData& data) {
    s->check_data(c.*settings, c.loss, data);
  };
  row.make = [s, settings](const TrainConfig& c, Backend& backend, int max_batch) {
    return s->make(c.*settings, backend, max_batch);
  };
  return row;
}

// The row named `name` (--model's value); throws one line naming the models there are.
const ModelRow& model_row(const std::string& name);
// The models' names, the built-in ones first, in the order messages list them.
std::vector<std::string> model_names();
// Those of next-token models (a token_shape), for messages: "gpt".
std::vector<std::string> next_token_model_names();
// Every row, in table order (the option checks read their flags).
std::vector<const ModelRow*> model_rows();
// A row besides the built-in ones (a test's own model), with its kind for
// checkpoints. Before any run reads the table; throws if the name is taken.
void register_model(ModelRow row);

}  // namespace ddp
