// test_mlp_gradients.cpp: the mixed-precision forward/backward of a small MLP
// against an independent double-precision forward/backward written here, in
// FP16 and in BF16 (the reference rounds the hidden activations to the
// model's format, where the model stores them).
//
// Tolerance: every stage rounds to FP16 (2^-11 relative) and the errors
// compound through the layers, so gradients are compared with a relative
// measure over the whole tensor, ||got - want|| / ||want|| < 1e-2 (about
// twenty FP16 ulps), plus a per-element check scaled by the tensor's largest
// magnitude. BF16 (2^-8) passes the same bounds: with the reference rounding
// where the model rounds, what is left is the FP32 sums' order and the
// roundings that land on the other side of a boundary. A wrong transpose, a
// missing activation derivative or a bias gradient summed over the wrong axis
// gives errors of order 1.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/ops/softmax_xent.h"
#include "trainer/models/mlp/mlp_model.h"
#include "trainer/params/parameter_store.h"
#include "support/lowp_format.h"
#include "support/test_support.h"

namespace ddp {
namespace {

// One Linear's place in the flat buffers, read from the registry by name.
struct Slices {
  int in_features = 0, out_features = 0;
  size_t weight_offset = 0, bias_offset = 0;
};

std::vector<Slices> linear_slices(const ParameterRegistry& registry, const std::vector<int64_t>& widths) {
  std::vector<Slices> out;
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    const ParameterTensor& w = registry[registry.find(mlp_tensor_prefix(i) + ".weight")];
    const ParameterTensor& b = registry[registry.find(mlp_tensor_prefix(i) + ".bias")];
    out.push_back({static_cast<int>(widths[i]), static_cast<int>(widths[i + 1]), w.offset, b.offset});
  }
  return out;
}

struct Reference {
  std::vector<double> grads;  // flat layout
  double loss = 0;
};

double act_d(Activation a, double z) {
  if (a == Activation::Relu) return z > 0 ? 1.0 : 0.0;
  return 0.5 * (1 + std::erf(z / std::sqrt(2.0))) + z * std::exp(-0.5 * z * z) / std::sqrt(2 * M_PI);
}
double act_f(Activation a, double z) {
  if (a == Activation::Relu) return z > 0 ? z : 0.0;
  return 0.5 * z * (1 + std::erf(z / std::sqrt(2.0)));
}

// Softmax cross-entropy, mean over rows, in double from the 16-bit weights and
// inputs (hidden activations rounded to the format, as the model stores them).
Reference reference(const test::LowpFormat& fmt, const std::vector<Slices>& layers, size_t flat_count,
                    const std::vector<lowp16>& w16, const std::vector<lowp16>& x16, const std::vector<int32_t>& labels,
                    int rows, Activation act) {
  const size_t n = layers.size();
  std::vector<std::vector<double>> xs(n + 1), zs(n);
  xs[0].assign(x16.size(), 0);
  for (size_t i = 0; i < x16.size(); ++i) xs[0][i] = fmt.widen(x16[i]);
  for (size_t l = 0; l < n; ++l) {
    const auto& s = layers[l];
    zs[l].assign(static_cast<size_t>(rows) * s.out_features, 0);
    xs[l + 1].assign(zs[l].size(), 0);
    for (int r = 0; r < rows; ++r)
      for (int o = 0; o < s.out_features; ++o) {
        double v = fmt.widen(w16[s.bias_offset + o]);
        for (int k = 0; k < s.in_features; ++k)
          v += xs[l][r * s.in_features + k] * fmt.widen(w16[s.weight_offset + o * s.in_features + k]);
        zs[l][r * s.out_features + o] = v;
        // The hidden activations are rounded to FP16 as the model stores
        // them, so both sides feed the next layer the same inputs (up to a
        // rounding boundary) and a pre-activation near 0 is on the same side
        // of the ReLU kink for both: in pure double, an FP16-sized
        // difference flipped a gate in about 1 run in 40 and failed the
        // test with a correct model.
        xs[l + 1][r * s.out_features + o] = l + 1 < n ? fmt.widen(fmt.narrow(static_cast<float>(act_f(act, v)))) : v;
      }
  }
  Reference ref;
  ref.grads.assign(flat_count, 0);
  const int classes = layers.back().out_features;
  std::vector<double> dz(static_cast<size_t>(rows) * classes);
  for (int r = 0; r < rows; ++r) {
    double mx = -1e300, se = 0;
    for (int c = 0; c < classes; ++c) mx = std::max(mx, zs[n - 1][r * classes + c]);
    for (int c = 0; c < classes; ++c) se += std::exp(zs[n - 1][r * classes + c] - mx);
    ref.loss += (mx + std::log(se) - zs[n - 1][r * classes + labels[r]]) / rows;
    for (int c = 0; c < classes; ++c)
      dz[r * classes + c] = (std::exp(zs[n - 1][r * classes + c] - mx) / se - (c == labels[r])) / rows;
  }
  for (size_t l = n; l-- > 0;) {
    const auto& s = layers[l];
    for (int o = 0; o < s.out_features; ++o)
      for (int r = 0; r < rows; ++r) {
        const double g = dz[r * s.out_features + o];
        ref.grads[s.bias_offset + o] += g;
        for (int k = 0; k < s.in_features; ++k)
          ref.grads[s.weight_offset + o * s.in_features + k] += g * xs[l][r * s.in_features + k];
      }
    if (l == 0) break;
    std::vector<double> dx(static_cast<size_t>(rows) * s.in_features, 0);
    for (int r = 0; r < rows; ++r)
      for (int k = 0; k < s.in_features; ++k) {
        double v = 0;
        for (int o = 0; o < s.out_features; ++o)
          v += dz[r * s.out_features + o] * fmt.widen(w16[s.weight_offset + o * s.in_features + k]);
        dx[r * s.in_features + k] = v * act_d(act, zs[l - 1][r * s.in_features + k]);
      }
    dz.swap(dx);
  }
  return ref;
}

void check_gradients(Activation act, Precision precision) {
  SCOPED_TRACE(precision_name(precision));
  const test::LowpFormat fmt{precision};
  std::mt19937_64 rng(test::test_seed());
  SCOPED_TRACE("seed " + std::to_string(test::test_seed()));
  const std::vector<int64_t> widths = {13, 24, 17, 5};
  const int rows = 19;
  const float loss_scale = 1024.0f;
  MlpConfig mlp;
  mlp.layer_widths = widths;
  mlp.activation = act;
  CpuBackend cpu(1, precision);
  MlpModel model(cpu, mlp, rows);
  const ParameterRegistry& registry = model.parameters();
  ParameterStore params(cpu, registry);
  params.set_master_weights(registry.initial_values(rng()));
  const auto x = fmt.random(rng, static_cast<size_t>(rows) * widths[0], -2.0f, 2.0f);
  const auto labels = test::random_labels(rng, rows, static_cast<int>(widths.back()));
  Buffer<lowp16> dx(cpu, x.size());
  Buffer<int32_t> dlabels(cpu, rows);
  Buffer<float> loss(cpu, 1);
  dx.upload(x);
  dlabels.upload(labels);
  params.grads_lowp.upload(test::LowpFormat::poison(registry.flat_count()));
  const ParameterTables tables = ParameterTables::flat(params.weights_lowp.data(), params.grads_lowp.data(), registry);

  DeviceBatch batch;
  batch.features_lowp = dx.data();
  batch.labels = dlabels.data();
  batch.rows = rows;
  const ModelOutput out = model.forward(batch, tables.weights_lowp);
  ASSERT_EQ(out.rows, rows);
  ASSERT_EQ(out.width, widths.back());
  SoftmaxXentForward xent;
  xent.logits = out.values;
  xent.labels = dlabels.data();
  xent.rows = rows;
  xent.cols = out.width;
  xent.real_cols = out.width;
  xent.loss_mean = loss.data();
  xent.correct_count = nullptr;
  softmax_xent_forward(cpu, xent);
  SoftmaxXentBackward dxent;
  dxent.logits = out.values;
  dxent.labels = dlabels.data();
  dxent.rows = rows;
  dxent.cols = out.width;
  dxent.real_cols = out.width;
  dxent.loss_scale = loss_scale;
  dxent.dlogits = model.output_grad();
  softmax_xent_backward(cpu, dxent);
  model.backward(tables.weights_lowp, tables.grads_lowp, false, nullptr);

  const std::vector<Slices> layers = linear_slices(registry, widths);
  const Reference ref =
      reference(fmt, layers, registry.flat_count(), params.weights_lowp.download(), x, labels, rows, act);
  EXPECT_NEAR(loss.download()[0], ref.loss, 2e-2 * std::fabs(ref.loss));
  const auto got = params.grads_lowp.download();
  for (size_t l = 0; l < layers.size(); ++l) {
    const auto& s = layers[l];
    for (auto [offset, count, what] :
         {std::tuple<size_t, size_t, const char*>{s.weight_offset, size_t(s.in_features) * s.out_features, "weight"},
          std::tuple<size_t, size_t, const char*>{s.bias_offset, size_t(s.out_features), "bias"}}) {
      double err2 = 0, ref2 = 0, max_abs = 0;
      for (size_t i = offset; i < offset + count; ++i) {
        const double want = ref.grads[i] * loss_scale, have = fmt.widen(got[i]);
        ASSERT_TRUE(std::isfinite(have)) << "layer " << l << " " << what << " element " << i - offset;
        err2 += (have - want) * (have - want);
        ref2 += want * want;
        max_abs = std::max(max_abs, std::fabs(want));
      }
      EXPECT_LT(std::sqrt(err2 / ref2), 1e-2) << "layer " << l << " " << what;
      for (size_t i = offset; i < offset + count; ++i)
        ASSERT_NEAR(fmt.widen(got[i]), ref.grads[i] * loss_scale, 2e-2 * max_abs + 1e-3)
            << "layer " << l << " " << what;
    }
  }
}

TEST(MlpGradients, ReluMatchesDoubleReference) {
  for (const Precision p : test::kBothPrecisions) check_gradients(Activation::Relu, p);
}
TEST(MlpGradients, GeluMatchesDoubleReference) {
  for (const Precision p : test::kBothPrecisions) check_gradients(Activation::Gelu, p);
}

TEST(MlpGradients, AccumulateAddsToExistingGradients) {
  std::mt19937_64 rng(test::test_seed());
  const int rows = 6;
  MlpConfig mlp;
  mlp.layer_widths = {8, 16, 4};
  CpuBackend cpu(1);
  MlpModel model(cpu, mlp, rows);
  ParameterStore params(cpu, model.parameters());
  params.set_master_weights(model.parameters().initial_values(3));
  const ParameterTables tables =
      ParameterTables::flat(params.weights_lowp.data(), params.grads_lowp.data(), model.parameters());
  const auto x = test::random_halves(rng, rows * 8);
  Buffer<lowp16> dx(cpu, x.size());
  dx.upload(x);
  DeviceBatch batch;
  batch.features_lowp = dx.data();
  batch.rows = rows;
  model.forward(batch, tables.weights_lowp);
  const auto dout = test::random_halves(rng, rows * 4);
  cpu.copy_to_device(model.output_grad(), dout.data(), dout.size() * sizeof(lowp16));
  model.backward(tables.weights_lowp, tables.grads_lowp, false, nullptr);
  const auto once = test::to_doubles(params.grads_lowp.download());
  cpu.copy_to_device(model.output_grad(), dout.data(), dout.size() * sizeof(lowp16));
  model.backward(tables.weights_lowp, tables.grads_lowp, true, nullptr);
  const auto twice = test::to_doubles(params.grads_lowp.download());
  for (size_t i = 0; i < once.size(); ++i)
    ASSERT_TRUE(test::close_enough(twice[i], 2 * once[i], test::kFp16RelTol, 1e-3)) << i;
}

}  // namespace
}  // namespace ddp
