// run_inputs.cpp: the run's inputs, from its data, resume and weights flags.
#include "trainer/config/run_inputs.h"

#include <sys/stat.h>

#include <filesystem>

#include "trainer/checkpoint/hf_gpt2.h"
#include "trainer/checkpoint/weights_io.h"
#include "trainer/config/model_catalog.h"

namespace ddp {

namespace fs = std::filesystem;

std::vector<std::string> run_input_paths(const TrainConfig& c) {
  const DataConfig& d = c.data;
  std::vector<std::string> paths = {c.config_path};
  if (d.kind == "fashion-mnist") {
    paths.push_back(d.data_dir);
    for (const char* name : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
                             "t10k-labels-idx1-ubyte.gz"})
      paths.push_back((fs::path(d.data_dir) / name).string());
  }
  for (const std::string* p : {&d.train_images, &d.train_labels, &d.test_images, &d.test_labels, &d.train_x, &d.train_y,
                               &d.test_x, &d.test_y, &d.train_csv, &d.test_csv, &d.train_text, &d.val_text})
    paths.push_back(*p);
  // The tokenizer's ranks file, read for a gpt2 model's text (and never an output).
  paths.push_back(c.gpt2_ranks_path);
  paths.push_back(c.resume_path);
  if (!c.init_weights_dir.empty()) {
    paths.push_back(c.init_weights_dir);
    // Only the names: nothing is read here (a Hugging Face directory's two files, or the .npy files).
    const bool hf_dir = fs::exists(fs::path(c.init_weights_dir) / "config.json");
    if (hf_dir)
      for (const std::string& file : hf_gpt2_output_files(c.init_weights_dir)) paths.push_back(file);
    else if (!is_safetensors_path(c.init_weights_dir))
      for (const std::string& file : weights_npy_paths(c.init_weights_dir, model_parameters(c))) paths.push_back(file);
  }
  std::vector<std::string> existing;
  for (const std::string& p : paths) {
    struct stat st {};
    if (!p.empty() && ::stat(p.c_str(), &st) == 0) existing.push_back(p);
  }
  return existing;
}

}  // namespace ddp
