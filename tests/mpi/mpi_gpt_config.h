// mpi_gpt_config.h: the tiny byte GPT the MPI suites train (mpi_test_gpt.cpp,
// mpi_test_zero.cpp): 2 layers, 2 heads, 32 wide, windows of 16 bytes of a
// repetitive text every rank writes alike to `dir`.
#pragma once

#include <fstream>
#include <random>
#include <string>

#include "trainer/config/train_config.h"

namespace ddp::test {

// Every rank writes the same text to its own directory.
inline TrainConfig tiny_gpt_config(const std::string& dir) {
  static const char* words[] = {"the ", "cat ", "sat ", "on ", "a ", "mat ", "and ", "dog ", "ran ", "far ", "away. "};
  std::mt19937 rng(11);
  std::string text;
  while (text.size() < 6000) text += words[rng() % 11];
  std::ofstream(dir + "/text.txt", std::ios::binary) << text;
  TrainConfig c;
  c.model = "gpt";
  // Named, not auto: the multi-rank and emulated-graph runs cover the
  // fused path too (auto is explicit).
  c.gpt.attention = AttentionPath::Fused;
  c.gpt.n_layer = 2;
  c.gpt.n_head = 2;
  c.gpt.n_embd = 32;
  c.data.kind = "text";
  c.data.train_text = dir + "/text.txt";
  c.data.block_size = 16;
  c.data.val_fraction = 0.1;
  c.loss = LossKind::SoftmaxCrossEntropy;
  c.loss_name = "xent";
  // SGD: its update is proportional to the gradient, so a wrong average
  // shows (AdamW's normalised step would hide a gradient off by a factor N).
  c.optimizer = OptimizerKind::Sgd;
  c.lr = 0.1;
  c.momentum = 0.9;
  c.lr_schedule = LrScheduleKind::Constant;
  c.log_every = 1000000;
  c.global_batch = 24;              // divisible by 2, 3 and 4
  c.loss_scaler.init_scale = 1024;  // no overflow in the N-rank FP16 sum
  return c;
}

}  // namespace ddp::test
