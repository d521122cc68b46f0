// test_gpt_reference_vs_torch.cpp: the double-precision GPT reference
// (gpt_reference.h) against PyTorch float64 autograd on the same weights and
// batch. launch/torch_gpt.py --dump writes the tiny model's weights, tokens,
// targets, loss, logits and gradients as '<f8' / '<i4' .npy files; the
// reference recomputes them here. This pins the reference, and so every test
// of the FP16 model against it, to PyTorch's nn.GELU(tanh), LayerNorm,
// softmax, cross-entropy and tied-embedding semantics.
//
// Skipped when /usr/bin/python3 has no torch (the script exits 77; see
// launch/install_bench_deps.sh).
//
// Tolerance: both sides are double precision on the same inputs and differ
// only in the order of their sums, ~1e-16 relative per operation; the
// comparison allows 1e-9 of each tensor's largest magnitude per element (an
// element-wise relative measure would divide by gradients that are 0 to
// within rounding). A mistake in either side is of order 1 relative.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "support/gpt_reference.h"
#include "support/temp_dir.h"
#include "support/test_support.h"
#include "trainer/io/npy_io.h"

namespace ddp::test {
namespace {

constexpr double kTorchRelTol = 1e-9;

std::vector<double> read_f8(const std::string& path, const std::vector<size_t>& shape) {
  const NpyArray a = read_npy(path);
  EXPECT_EQ(a.dtype, NpyDtype::f8) << path;
  EXPECT_EQ(a.shape, shape) << path;
  std::vector<double> out(a.count());
  if (a.dtype == NpyDtype::f8 && a.data.size() == out.size() * sizeof(double))
    std::memcpy(out.data(), a.data.data(), a.data.size());  // little-endian host, as the file
  return out;
}

std::vector<int32_t> read_i4(const std::string& path) {
  const NpyArray a = read_npy(path);
  EXPECT_EQ(a.dtype, NpyDtype::i4) << path;
  std::vector<int32_t> out;
  for (int64_t v : npy_values_as_int(a)) out.push_back(static_cast<int32_t>(v));
  return out;
}

int json_int(const std::string& json, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(json, m, std::regex("\"" + key + "\": (-?[0-9]+)")))
    throw std::runtime_error("config.json has no integer " + key);
  return std::stoi(m[1]);
}

// Largest |got - want| over a tensor, relative to its largest |want|.
double max_relative_difference(const std::vector<double>& got, const std::vector<double>& want) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, std::fabs(got[i] - want[i]));
    scale = std::max(scale, std::fabs(want[i]));
  }
  return scale > 0 ? diff / scale : diff;
}

TEST(GptReferenceVsTorch, LossLogitsAndGradientsMatchFloat64Autograd) {
  const std::string python = std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
  const test::TempDir temp_dir("gpt_vs_torch");
  const std::string& dir = temp_dir.path();
  const uint64_t seed = test_seed() % 1000000007ULL;
  SCOPED_TRACE("seed " + std::to_string(seed) + ", dump in " + dir);
  const CommandResult dumped = run_command(python + " " + DDP_SOURCE_DIR "/launch/torch_gpt.py --dump " + dir +
                                           " --seed " + std::to_string(seed) + " 2>&1");
  if (dumped.exit_code == 77) {
    GTEST_SKIP() << "no torch for " << python << ": " << dumped.output;
  }
  ASSERT_EQ(dumped.exit_code, 0) << dumped.output;

  std::stringstream json;
  json << std::ifstream(dir + "/config.json").rdbuf();
  GptReferenceConfig cfg;
  cfg.n_layer = json_int(json.str(), "n_layer");
  cfg.n_head = json_int(json.str(), "n_head");
  cfg.n_embd = json_int(json.str(), "n_embd");
  cfg.block_size = json_int(json.str(), "block_size");
  cfg.vocab = json_int(json.str(), "vocab_size");
  cfg.vocab_padded = json_int(json.str(), "padded_vocab_size");
  const int batch = json_int(json.str(), "batch"), seq = json_int(json.str(), "seq");
  ASSERT_LT(cfg.vocab, cfg.vocab_padded) << "the dump should exercise padded columns";

  GptTensors weights, torch_grads;
  for (const auto& s : gpt_tensor_shapes(cfg)) {
    weights[s.name] = read_f8(dir + "/weights/" + s.name + ".npy", s.shape);
    torch_grads[s.name] = read_f8(dir + "/grads/" + s.name + ".npy", s.shape);
  }
  const std::vector<int32_t> tokens = read_i4(dir + "/tokens.npy"), targets = read_i4(dir + "/targets.npy");
  const double torch_loss = read_f8(dir + "/loss.npy", {1})[0];
  const std::vector<double> torch_logits =
      read_f8(dir + "/logits.npy", {static_cast<size_t>(batch * seq), static_cast<size_t>(cfg.vocab_padded)});
  ASSERT_FALSE(::testing::Test::HasFailure());

  const GptReferenceResult ours = gpt_reference_run(cfg, weights, tokens, targets, batch, seq);
  EXPECT_NEAR(ours.loss, torch_loss, kTorchRelTol * std::fabs(torch_loss));
  EXPECT_LT(max_relative_difference(ours.logits, torch_logits), kTorchRelTol) << "logits";
  double worst = 0;
  for (const auto& [name, want] : torch_grads) {
    const double d = max_relative_difference(ours.grads.at(name), want);
    worst = std::max(worst, d);
    EXPECT_LT(d, kTorchRelTol) << name;
  }
  std::printf("loss %.17g (torch %.17g), worst gradient difference %.3g of the tensor's largest\n", ours.loss,
              torch_loss, worst);
  if (!::testing::Test::HasFailure()) std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ddp::test
