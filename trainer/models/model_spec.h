// model_spec.h: one model as the rest of the program may know it, written
// by the model against its own settings (MlpConfig, GptConfig): its row of
// the model table. config/model_table.h binds each row to the member of
// TrainConfig that holds its settings, and the catalog, the factory, the
// checkpoint checks and --bench read the table, so a new model adds its
// folder under trainer/models/ and a row, not a case in each of them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "trainer/models/loss_kind.h"
#include "trainer/models/model.h"
#include "trainer/params/parameter_registry.h"

namespace ddp {

struct TrainTestData;

// What a checkpoint may say of a model of this kind without a run's config
// (checkpoint/model_kinds.h reads it).
struct ModelKind {
  std::string name;  // --model's value and a checkpoint's "model"
  // A checkpoint's dims: the first problem with them, or "" with `count`
  // set to the parameter count they imply.
  std::string (*dims_problem)(const std::vector<int64_t>& dims, uint64_t& count) = nullptr;
  // The activation names a checkpoint of it may record.
  std::vector<std::string> activations;
};

// What a next-token model predicts over: windows of `context` token ids in,
// logits over `vocab_size` classes out at each position, of which the
// first `real_vocab` are the tokenizer's (the rest pad the GEMMs).
struct TokenShape {
  int context = 0;
  int vocab_size = 0;
  int real_vocab = 0;
};

// A flag only this model reads (launch/cli/options_check.cpp refuses it
// with another model): "--<flag> needs --model <name> (<hint>)".
struct ModelFlag {
  std::string flag;  // without the dashes
  std::string hint;  // "" or what the other models have instead
};

// A flag that sets one of a model's checkpoint dims (ModelSpec::dims):
// --generate refuses one that disagrees with the checkpoint it samples.
struct DimFlag {
  std::string flag;  // without the dashes
  std::string what;  // what the dim counts: "layers"
};

template <class Settings>
struct ModelSpec {
  ModelKind kind;
  // A next-token model's windows and vocabulary: it reads int32 token
  // windows and predicts the next token at each position (--bench draws
  // random windows for it, --generate and --sample-every sample it).
  // nullptr: it reads FP16 features.
  TokenShape (*token_shape)(const Settings&) = nullptr;
  // A next-token model's windows and vocabulary set (the context from
  // --block-size, a byte model's vocabulary); with token_shape.
  void (*set_token_shape)(Settings&, const TokenShape&) = nullptr;
  std::vector<ModelFlag> flags;
  // The flags' settings: the first problem, naming the flag, or "" (nullptr: none to check).
  std::string (*settings_problem)(const Settings&) = nullptr;
  // Its tensors, without building it (no backend).
  ParameterRegistry (*parameters)(const Settings&) = nullptr;
  // What a checkpoint records of its shape, and the activation beside it.
  std::vector<int64_t> (*dims)(const Settings&) = nullptr;
  // The settings a checkpoint's dims describe (dims the kind's dims_problem
  // passed), and the flags that set them, by position in the dims.
  void (*from_dims)(Settings&, const std::vector<int64_t>& dims) = nullptr;
  std::vector<DimFlag> dim_flags;
  std::string (*activation_name)(const Settings&) = nullptr;
  // "MLP 784-512-10 relu" for the banner; "784-512-10" for --bench's line.
  std::string (*summary)(const Settings&) = nullptr;
  std::string (*shape_text)(const Settings&) = nullptr;
  // Model FLOPs per sample of one training step (forward and backward).
  double (*flops_per_sample)(const Settings&) = nullptr;
  // Tokens a sample predicts (a window's length); 0 for one prediction.
  int64_t (*tokens_per_sample)(const Settings&) = nullptr;
  // Widths its data must have: features (or tokens) in, outputs out.
  int64_t (*input_width)(const Settings&) = nullptr;
  int64_t (*output_width)(const Settings&) = nullptr;
  // What it takes from the data before it is built (a GPT's vocabulary and
  // context); nullptr where it takes nothing.
  void (*bind_to_data)(Settings&, const TrainTestData&) = nullptr;
  // The data fits it; throws one line naming the flag and the file.
  void (*check_data)(const Settings&, LossKind, const TrainTestData&) = nullptr;
  std::unique_ptr<Model> (*make)(const Settings&, Backend&, int max_batch) = nullptr;
};

}  // namespace ddp
