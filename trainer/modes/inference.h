// inference.h: --predict X.npy --predictions OUT.npy: FP16 inference of the
// starting weights (a --resume checkpoint or --init-weights) on every row of
// X, batched by --batch-size, each rank its contiguous share of the rows,
// gathered in order on rank 0, which writes OUT.npy: the outputs [N, K]
// (float32; "logits"), their softmax in FP32 ("probs", cross-entropy
// models), or the class ids [N] (int64, torch.argmax's first maximum;
// "class"). No training data is read and nothing else is written.
#pragma once

#include <string>
#include <vector>

#include "comm/communicator.h"
#include "kernels/backend.h"
#include "trainer/config/train_config.h"

namespace ddp {

// The checks of --predict's files before anything runs: X is a readable
// .npy of [N, input width]; OUT is not an input, not a directory, and
// replaces only a file ddp_train wrote, or any with --overwrite
// (output_registry.h; the note returned says so, "" when OUT is new).
// Throws one line.
std::string check_prediction_files(const TrainConfig& config);

// An output .npy named by `flag` (--predictions, --generate-logits): not one
// of `inputs`, not a directory, a file it may replace if anything is there
// (check_replaceable), in a directory that exists. Throws one line; returns
// a note when it replaces one.
std::string check_npy_output_path(const std::string& out, const std::string& flag,
                                  const std::vector<std::string>& inputs, bool overwrite);

// The starting weights in the flat layout of `registry`: --init-weights, or
// the checkpoint --resume names (or the newest valid in --checkpoint-dir),
// checked against the configured model. `mode` ("--predict") begins the
// error when no checkpoint is found. Throws one line.
std::vector<float> load_starting_weights(const TrainConfig& config, const ParameterRegistry& registry,
                                         const std::string& mode);

// Runs the prediction on every rank (collectives: one broadcast per rank).
void run_prediction(const TrainConfig& config, Backend& backend, Communicator& comm);

}  // namespace ddp
