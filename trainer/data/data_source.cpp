// data_source.cpp
#include "trainer/data/data_source.h"

#include <filesystem>
#include <new>

#include "kernels/error.h"
#include "trainer/data/csv_reader.h"
#include "trainer/data/idx_reader.h"
#include "trainer/data/npy_dataset.h"
#include "trainer/data/synthetic_data.h"
#include "trainer/data/text_data.h"

namespace ddp {
namespace {
void require_path(const std::string& value, const char* flag, const std::string& kind) {
  if (value.empty()) throw Error(std::string(flag) + " is required with --data " + kind);
}

// The readers name the file whose allocation failed; this is the net under
// them, naming the files of one data set, so std::bad_alloc never reaches
// the user.
template <typename Load>
auto loading(const std::string& files, Load&& load) -> decltype(load()) {
  try {
    return load();
  } catch (const std::bad_alloc&) {
    throw Error(files + ": out of memory while loading: data sets are held in memory whole, as FP32");
  }
}

}  // namespace

TrainTestData load_train_test(const DataConfig& c, uint64_t seed) {
  TrainTestData d;
  if (c.kind == "fashion-mnist") {
    if (!std::filesystem::is_directory(c.data_dir))
      throw Error("--data-dir: " + c.data_dir +
                  " is not a directory (Fashion-MNIST comes from Debian's dataset-fashion-mnist package)");
    d.train = loading(c.data_dir, [&] { return load_fashion_mnist(c.data_dir, true); });
    d.test = loading(c.data_dir, [&] { return load_fashion_mnist(c.data_dir, false); });
  } else if (c.kind == "idx") {
    require_path(c.train_images, "--train-images", c.kind);
    require_path(c.train_labels, "--train-labels", c.kind);
    require_path(c.test_images, "--test-images", c.kind);
    require_path(c.test_labels, "--test-labels", c.kind);
    d.train = loading(c.train_images + ", " + c.train_labels,
                      [&] { return load_idx_dataset(c.train_images, c.train_labels); });
    d.test =
        loading(c.test_images + ", " + c.test_labels, [&] { return load_idx_dataset(c.test_images, c.test_labels); });
  } else if (c.kind == "npy") {
    require_path(c.train_x, "--train-x", c.kind);
    require_path(c.train_y, "--train-y", c.kind);
    require_path(c.test_x, "--test-x", c.kind);
    require_path(c.test_y, "--test-y", c.kind);
    d.train = loading(c.train_x + ", " + c.train_y, [&] { return load_npy_dataset(c.train_x, c.train_y); });
    d.test = loading(c.test_x + ", " + c.test_y, [&] { return load_npy_dataset(c.test_x, c.test_y); });
  } else if (c.kind == "csv") {
    require_path(c.train_csv, "--train-csv", c.kind);
    require_path(c.test_csv, "--test-csv", c.kind);
    d.train = loading(c.train_csv, [&] { return load_csv_dataset(c.train_csv); });
    d.test = loading(c.test_csv, [&] { return load_csv_dataset(c.test_csv); });
  } else if (c.kind == "synthetic") {
    // Train and test share the problem (A, b) drawn from the seed, not the samples.
    d.train = make_synthetic_dataset(seed, static_cast<size_t>(c.synthetic_train_samples));
    d.test = make_synthetic_dataset(seed, static_cast<size_t>(c.synthetic_test_samples), 10, 10, 0.01f, 1);
  } else if (c.kind == "text") {
    d = loading(c.val_text.empty() ? c.train_text : c.train_text + ", " + c.val_text,
                [&] { return load_text_train_test(c); });
  } else {
    throw Error("--data: '" + c.kind + "' is not one of fashion-mnist, idx, npy, csv, synthetic, text");
  }
  validate_dataset(d.train, d.train.source);
  validate_dataset(d.test, d.test.source);
  if (d.train.features != d.test.features)
    throw Error("data: train set has " + std::to_string(d.train.features) + " features, test set " +
                std::to_string(d.test.features));
  if (d.train.is_classification() != d.test.is_classification())
    throw Error("data: train and test sets disagree on labels (class labels vs regression targets)");
  return d;
}

}  // namespace ddp
