// data_config.h: which data a run reads and how (--data and the flags of
// its readers): the data loaders' own settings, a part of the run's
// TrainConfig (config/train_config.h).
#pragma once

#include <cstdint>
#include <string>

namespace ddp {

struct DataConfig {
  std::string kind = "fashion-mnist";  // fashion-mnist | idx | npy | csv | synthetic | text
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  std::string train_images, train_labels, test_images, test_labels;  // idx
  std::string train_x, train_y, test_x, test_y;                      // npy
  std::string train_csv, test_csv;                                   // csv
  // text (trainer/data/text_data.h): token files, windows of block_size + 1.
  std::string train_text, val_text;  // val_text empty: the last val_fraction of train_text validates
  double val_fraction = 0.1;
  std::string token_format = "auto";  // auto | bytes | raw-u16 (token_files.h)
  int64_t block_size = 128;           // T: tokens of context per window (a GPT's --block-size)
  int64_t vocab_size = 0;             // the model's vocabulary; 0: from the data (256 bytes, 50304 GPT-2)
  int64_t synthetic_train_samples = 8192;
  int64_t synthetic_test_samples = 1024;
};

}  // namespace ddp
