// model_table.cpp: the built-in rows, one per model.
#include "trainer/config/model_table.h"

#include <deque>

#include "kernels/error.h"
#include "trainer/checkpoint/model_kinds.h"
#include "trainer/models/gpt/gpt_spec.h"
#include "trainer/models/mlp/mlp_spec.h"

namespace ddp {
namespace {

// A deque: registering a row keeps references to the others valid.
std::deque<ModelRow>& rows() {
  static std::deque<ModelRow> table = {
      bind_model(mlp_spec(), &TrainConfig::mlp),
      bind_model(gpt_spec(), &TrainConfig::gpt),
  };
  return table;
}

const ModelRow* find_row(const std::string& name) {
  for (const ModelRow& r : rows())
    if (r.kind.name == name) return &r;
  return nullptr;
}

std::string names_text() {
  std::string text;
  for (const std::string& n : model_names()) text += (text.empty() ? "" : ", ") + n;
  return text;
}

}  // namespace

const ModelRow& model_row(const std::string& name) {
  const ModelRow* row = find_row(name);
  if (row == nullptr) throw Error("--model: '" + name + "' is not one of " + names_text());
  return *row;
}

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const ModelRow& r : rows()) names.push_back(r.kind.name);
  return names;
}

std::vector<std::string> next_token_model_names() {
  std::vector<std::string> names;
  for (const ModelRow& r : rows())
    if (r.token_shape) names.push_back(r.kind.name);
  return names;
}

std::vector<const ModelRow*> model_rows() {
  std::vector<const ModelRow*> all;
  for (const ModelRow& r : rows()) all.push_back(&r);
  return all;
}

void register_model(ModelRow row) {
  if (find_row(row.kind.name) != nullptr) throw Error("model '" + row.kind.name + "' is registered already");
  register_model_kind(row.kind);
  rows().push_back(std::move(row));
}

}  // namespace ddp
