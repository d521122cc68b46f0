// model_catalog.h: what the rest of the program may know of the configured
// model without building it (no backend): its tensors, the shape a
// checkpoint records, its banner text, the widths its data must have.
// With model_factory.h (which builds it) the one place that maps a config
// to its model; everything else (trainer, evaluator, checkpoints, weight
// export, outputs) sees a Model and its ParameterRegistry. Both read the
// configured model's row of the model table (model_table.h), so neither
// has a case per model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trainer/config/train_config.h"
#include "trainer/models/model_spec.h"
#include "trainer/params/parameter_registry.h"

namespace ddp {

struct TrainTestData;

// The model's tensors without building it (no backend): for checkpoints,
// weight files and output checks before a run starts.
ParameterRegistry model_parameters(const TrainConfig& config);

// The model's kind as a checkpoint records it ("mlp", "gpt").
std::string model_kind_name(const TrainConfig& config);

// What a checkpoint records of the model's shape (version 1: the MLP's
// layer widths) and the activation name it records with it.
std::vector<int64_t> model_dims(const TrainConfig& config);
std::string model_activation_name(const TrainConfig& config);
// "MLP 784-512-512-10 relu", for the banner; "784-512-512-10" (a GPT:
// "gpt-l4-h4-c128-t128-v256") for --bench's line.
std::string model_summary(const TrainConfig& config);
std::string model_shape_text(const TrainConfig& config);
// Model FLOPs per sample of one training step (forward and backward).
double model_flops_per_sample(const TrainConfig& config);
// Tokens a sample predicts: a GPT's window length T; 0 for the MLP.
int64_t model_tokens_per_sample(const TrainConfig& config);
// A next-token model: it reads token windows (--bench draws random ones),
// not FP16 features, and --generate and --sample-every can sample it.
bool model_reads_tokens(const TrainConfig& config);
// Its windows and vocabulary (models/model_spec.h); throws for a model that
// reads features.
TokenShape model_token_shape(const TrainConfig& config);
// The config with what the model takes from the data filled in (the GPT's
// vocabulary and context: Dataset::vocab_size, real_vocab_size,
// tokens_per_sample); the MLP's is the config as it is. The trainer builds
// its model from the bound config.
TrainConfig bind_model_to_data(TrainConfig config, const TrainTestData& data);

// Widths the data must have: features per sample in, and outputs per
// prediction (classes or regression targets); for --bench's random data.
int64_t model_input_width(const TrainConfig& config);
int64_t model_output_width(const TrainConfig& config);

// The data fits the model (input width, labels below the output width or
// targets of the output width); throws one line naming the flag and file.
void check_model_matches_data(const TrainConfig& config, const TrainTestData& data);

}  // namespace ddp
