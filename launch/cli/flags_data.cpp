// flags_data.cpp: the data flags (trainer/data/data_config.h: the settings
// they fill).
#include "launch/cli/flag_groups.h"

namespace po = boost::program_options;

namespace ddp {

po::options_description data_flags(TrainConfig& c) {
  po::options_description data("Data");
  // One flag per row, as --help lists them.
  // clang-format off
  data.add_options()
      ("data", po::value(&c.data.kind)->default_value(c.data.kind), "fashion-mnist | idx | npy | csv | synthetic | text")
      ("data-dir", po::value(&c.data.data_dir)->default_value(c.data.data_dir), "Fashion-MNIST directory (gzipped IDX)")
      ("train-images", po::value(&c.data.train_images), "IDX training images")
      ("train-labels", po::value(&c.data.train_labels), "IDX training labels")
      ("test-images", po::value(&c.data.test_images), "IDX test images")
      ("test-labels", po::value(&c.data.test_labels), "IDX test labels")
      ("train-x", po::value(&c.data.train_x), ".npy training features [N, D]")
      ("train-y", po::value(&c.data.train_y), ".npy training labels [N] or targets [N, K]")
      ("test-x", po::value(&c.data.test_x), ".npy test features")
      ("test-y", po::value(&c.data.test_y), ".npy test labels or targets")
      ("train-csv", po::value(&c.data.train_csv), "CSV training set (label last, optional header)")
      ("test-csv", po::value(&c.data.test_csv), "CSV test set")
      ("train-text", po::value(&c.data.train_text),
       "--data text: training tokens: any file as bytes, an llm.c .bin shard, or raw uint16 (--token-format)")
      ("val-text", po::value(&c.data.val_text), "--data text: validation tokens, in the same encoding")
      ("val-fraction", po::value(&c.data.val_fraction)->default_value(c.data.val_fraction, "0.1"),
       "--data text without --val-text: validate on the last F of --train-text (cut at a window boundary)")
      ("token-format", po::value(&c.data.token_format)->default_value(c.data.token_format),
       "auto | bytes | raw-u16 (auto: an llm.c .bin shard by its magic, else the bytes)")
      ("synthetic-samples", po::value(&c.data.synthetic_train_samples)->default_value(c.data.synthetic_train_samples),
       "training samples of --data synthetic")
      ("no-shuffle", po::bool_switch(), "keep the data order (no per-epoch shuffle)")
      ("drop-last", po::bool_switch(&c.drop_last), "drop the last partial batch of each epoch")
      ("no-prefetch", po::bool_switch(),
       "load each batch when its step needs it, instead of copying it to the device one batch ahead (for timing)");
  // clang-format on
  return data;
}

}  // namespace ddp
