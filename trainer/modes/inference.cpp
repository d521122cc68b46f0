// inference.cpp
#include "trainer/modes/inference.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "kernels/buffer.h"
#include "kernels/error.h"
#include "kernels/lowp_convert.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/checkpoint_dir.h"
#include "trainer/checkpoint/checkpoint_validation.h"
#include "trainer/checkpoint/weights_io.h"
#include "trainer/data/dataset.h"
#include "trainer/io/npy_io.h"
#include "trainer/io/output_directory.h"
#include "trainer/io/output_registry.h"
#include "trainer/params/weights_range.h"
#include "trainer/config/model_catalog.h"
#include "trainer/config/model_factory.h"
#include "trainer/config/run_inputs.h"
#include "trainer/params/parameter_store.h"

namespace ddp {
namespace fs = std::filesystem;
namespace {

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa {
  }, sb{};
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

// One output row to what --predict-output asks for, appended to `out`.
void append_row(const TrainConfig& c, const float* logits, int width, std::vector<float>& values,
                std::vector<int64_t>& classes) {
  if (c.predict_output == "class") {
    classes.push_back(std::max_element(logits, logits + width) - logits);  // the first maximum, as torch.argmax
  } else if (c.predict_output == "probs") {  // softmax in FP32, max subtracted, as the loss computes it
    const float top = *std::max_element(logits, logits + width);
    double sum = 0;
    for (int j = 0; j < width; ++j) sum += std::exp(static_cast<double>(logits[j]) - top);
    for (int j = 0; j < width; ++j)
      values.push_back(static_cast<float>(std::exp(static_cast<double>(logits[j]) - top) / sum));
  } else {
    values.insert(values.end(), logits, logits + width);
  }
}

}  // namespace

std::vector<float> load_starting_weights(const TrainConfig& c, const ParameterRegistry& registry,
                                         const std::string& mode) {
  if (!c.init_weights_dir.empty()) {  // .safetensors or .npy directory
    std::vector<float> weights = load_weights(c.init_weights_dir, registry);
    check_weights_fit_precision(weights, false, registry, c.precision, "--init-weights " + c.init_weights_dir);
    return weights;
  }
  std::string path = c.resume_path;
  if (path.empty()) {
    path = find_newest_valid_checkpoint(c.checkpoint_dir).newest_valid;
    if (path.empty()) throw Error(mode + ": no valid checkpoint in " + c.checkpoint_dir);
  }
  const TrainState s = read_checkpoint(path);
  validate_checkpoint_contents(s, path);
  check_checkpoint_model_kind(s, model_kind_name(c), path);
  check_checkpoint_compatible(s, model_dims(c), model_activation_name(c), c.loss_name, registry.parameter_count(),
                              path);
  check_checkpoint_tensors(s, registry, path);
  check_weights_fit_precision(s.master_weights_fp32, true, registry, c.precision, path);
  return registry.unpack(s.master_weights_fp32);
}

std::string check_prediction_files(const TrainConfig& c) {
  const NpyArray x = read_npy(c.predict_path);
  require_feature_dtype(x, c.predict_path);
  const int64_t width = model_input_width(c);
  if (x.shape.size() != 2 || static_cast<int64_t>(x.shape[1]) != width)
    throw Error("--predict " + c.predict_path + ": shape " + npy_shape_text(x.shape) + ", the model reads rows of " +
                std::to_string(width) + " features: expected (N, " + std::to_string(width) + ")");
  // Every input: the rows, the config, the checkpoint, the weights and each
  // .npy file of a weights directory, any data file named.
  std::vector<std::string> inputs = run_input_paths(c);
  inputs.push_back(c.predict_path);
  return check_npy_output_path(c.predictions_path, "--predictions", inputs, c.overwrite);
}

std::string check_npy_output_path(const std::string& out, const std::string& flag,
                                  const std::vector<std::string>& inputs, bool overwrite) {
  for (const std::string& input : inputs)
    if (!input.empty() && same_file(out, input))
      throw Error(flag + " " + out + " is one of this run's inputs (" + input + "): choose another path");
  std::error_code ec;
  if (fs::is_directory(out, ec)) throw Error(flag + " " + out + ": is a directory");
  if (fs::exists(out, ec) && !fs::is_regular_file(out, ec))
    throw Error(flag + " " + out + ": exists and is not a file; refusing to replace it");
  require_output_directory(out, flag);
  return check_replaceable(out, flag, overwrite);
}

void run_prediction(const TrainConfig& c, Backend& backend, Communicator& comm) {
  const NpyArray x_file = read_npy(c.predict_path);
  const std::vector<float> x = npy_values_as_float(x_file);
  const size_t n = x_file.shape[0], d = x_file.shape[1];
  // As a training file's: a NaN or Inf row would predict nothing meaningful.
  require_finite(x, d, c.predict_path, "feature");
  const int batch = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(c.batch_size, std::max<size_t>(n, 1))));
  std::unique_ptr<Model> model = make_model(c, backend, batch);
  ParameterStore params(backend, model->parameters());
  params.set_master_weights(load_starting_weights(c, model->parameters(), "--predict"));
  const int world = comm.world_size(), rank = comm.rank();
  const int width = static_cast<int>(model_output_width(c));
  const size_t per_row = c.predict_output == "class" ? 1 : static_cast<size_t>(width);
  // Rank r predicts rows [first(r), first(r + 1)): contiguous, so rank 0
  // places each rank's block at its offset.
  auto first = [&](int r) { return n * static_cast<size_t>(r) / static_cast<size_t>(world); };
  std::vector<float> values;
  std::vector<int64_t> classes;
  Buffer<lowp16> rows_lowp(backend, static_cast<size_t>(batch) * d);
  std::vector<lowp16> staging(static_cast<size_t>(batch) * d);
  std::vector<lowp16> out_lowp(static_cast<size_t>(batch) * width);
  std::vector<float> out_fp32(out_lowp.size());
  const WeightTable weights_lowp = WeightTable::flat(params.weights_lowp.data(), model->parameters());
  for (size_t at = first(rank); at < first(rank + 1); at += batch) {
    const int rows = static_cast<int>(std::min<size_t>(batch, first(rank + 1) - at));
    float_to_lowp_array(backend.precision(), x.data() + at * d, staging.data(), static_cast<size_t>(rows) * d);
    backend.copy_to_device(rows_lowp.data(), staging.data(), static_cast<size_t>(rows) * d * sizeof(lowp16));
    DeviceBatch b;
    b.features_lowp = rows_lowp.data();
    b.rows = rows;
    const ModelOutput out = model->forward(b, weights_lowp);
    backend.copy_to_host(out_lowp.data(), out.values, static_cast<size_t>(rows) * width * sizeof(lowp16));
    lowp_to_float_array(backend.precision(), out_lowp.data(), out_fp32.data(), static_cast<size_t>(rows) * width);
    for (int r = 0; r < rows; ++r)
      append_row(c, out_fp32.data() + static_cast<size_t>(r) * width, width, values, classes);
  }
  // Gather on rank 0: each rank's block broadcast from it in turn (in
  // device memory: NCCL's broadcast takes nothing else). Class ids travel
  // as int64 bytes.
  const size_t elem = c.predict_output == "class" ? sizeof(int64_t) : sizeof(float);
  std::vector<uint8_t> all(rank == 0 ? n * per_row * elem : 0);
  for (int q = 0; q < world; ++q) {
    const size_t bytes = (first(q + 1) - first(q)) * per_row * elem;
    if (bytes == 0) continue;
    Buffer<uint8_t> block(backend, bytes);
    if (q == rank)
      backend.copy_to_device(block.data(),
                             elem == sizeof(float) ? static_cast<const void*>(values.data()) : classes.data(), bytes);
    comm.broadcast_bytes(block.data(), bytes, q);
    if (rank == 0) backend.copy_to_host(all.data() + first(q) * per_row * elem, block.data(), bytes);
  }
  if (rank != 0) return;
  if (c.predict_output == "class")
    save_npy_int64(c.predictions_path, reinterpret_cast<const int64_t*>(all.data()), {n});
  else
    save_npy_fp32(c.predictions_path, reinterpret_cast<const float*>(all.data()), {n, static_cast<size_t>(width)});
  std::printf("predictions: %zu rows (%s) written to %s\n", n, c.predict_output.c_str(), c.predictions_path.c_str());
}

}  // namespace ddp
