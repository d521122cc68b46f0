// idx_reader.h: the IDX format of MNIST and Fashion-MNIST, gzipped or not.
// An IDX file is a 4-byte magic (0, 0, dtype, ndim), ndim big-endian uint32
// dimensions, then the row-major data. Only dtype 0x08 (unsigned byte) is
// read: it is what (Fashion-)MNIST images and labels use.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trainer/data/dataset.h"

namespace ddp {

struct IdxArray {
  std::vector<size_t> dims;   // e.g. {60000, 28, 28}
  std::vector<uint8_t> data;  // product(dims) bytes, row-major
};

// Parses a whole (decompressed) IDX file. DataError naming `name` on a bad
// magic, an unsupported dtype, or a truncated header or body.
IdxArray parse_idx(const std::vector<uint8_t>& bytes, const std::string& name);

// Reads and parses one file, gunzipping it when it is gzip.
IdxArray read_idx_file(const std::string& path);

// Images idx3 (N, H, W) or idx2 (N, D) -> x [N, H*W or D] scaled by 1/255;
// labels idx1 (N) -> class labels, num_classes = max label + 1.
Dataset load_idx_dataset(const std::string& images_path, const std::string& labels_path);

// The four standard Fashion-MNIST names in `dir`:
// {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz (or without .gz).
Dataset load_fashion_mnist(const std::string& dir, bool train);

}  // namespace ddp
