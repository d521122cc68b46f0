// cuda_test_gemm_epilogues.cpp: CudaBackend's GEMM epilogues (bias,
// ReLU/GELU, pre-activation output, activation gradient, bias gradient)
// against CpuBackend on the model's shapes and odd ones, on every route
// (cuBLASLt, the CUDA-core fallback), and which route each GEMM of the model
// takes. Tolerances: below and cuda_test_support.h.
#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_gemm_route.h"
#include "trainer/models/mlp/mlp_model.h"
#include "trainer/params/parameter_store.h"
#include "trainer/params/parameter_store.h"
#include "cuda_test_support.h"
#include "support/gemm_epilogue_support.h"

namespace ddp {
namespace {

using namespace test;  // cuda_test_support.h: CudaKernels, comparisons, tolerances

// ---- GEMM epilogues ---------------------------------------------------------------
// Activation, pre-activation output, activation gradient and bias gradient of
// A (backend.h, gemm_epilogue.h) against CpuBackend on the same inputs. The
// C and pre-activation tolerance is the GEMM rule above with the summation
// floor scaled by the largest |act'| (1.13, GELU), the bias gradient's the
// bias-grad rule (sum|terms| of the k values summed): BGRADB and the
// column-sum kernel (16 row lanes, each summing every 16th of the k terms,
// then the lanes in order) both sum in another order than the CPU's. The
// kernel's own FP32 error is at most (k/16 + 16) * 2^-24 * sum|terms|
// (< 2e-6 * sum|terms| for the k <= 256 here), the CPU's is checked against
// double to 1e-5 * sum|terms| (test_gemm_epilogues.cpp), and rounding
// errors of random sign make both far smaller in practice. Magnitudes come from
// the double reference of gemm_epilogue_support.h. CUDA's erff/expf and
// glibc's differ by up to 2 FP32 ulps each: in GELU and most of its gradient
// that is far inside fmt.rel_tol(), but gelu'(z) = cdf + z pdf cancels near
// z = -0.7518, where the slope's relative error reaches ~4e-4 while the
// summation floor (scaled by |gelu'|) vanishes; the reference's absolute
// c_slope_error, 4 * 2^-24 * (|cdf| + |z pdf|) * |v| (~1e-7 * |v|), covers it.

void run_epilogue_case(CpuBackend& cpu, Backend& gpu, std::mt19937_64& rng, const test::EpilogueCase& c,
                       const std::string& what) {
  SCOPED_TRACE(what + " m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k) + " ta=" +
               std::to_string(c.trans_a == Transpose::Yes) + " tb=" + std::to_string(c.trans_b == Transpose::Yes) +
               " pad=" + std::to_string(c.pad) + " offset=" + std::to_string(c.offset));
  const LowpFormat fmt{gpu.precision()};
  const auto in = test::make_epilogue_inputs(rng, c, fmt);
  const auto want = test::run_epilogue_case(cpu, c, in);
  const auto got = test::run_epilogue_case(gpu, c, in);
  const auto ref = test::epilogue_reference(c, in, fmt);
  // Window elements against the CPU; everything outside the window must
  // still hold what it held (C: c0; pre-activation: poison).
  std::vector<lowp16> got_c, want_c, got_pre, want_pre, got_rest, want_rest;
  std::vector<double> floor;
  for (size_t idx = 0; idx < c.c_count(); ++idx) {
    const bool inside = idx >= c.offset && static_cast<int>((idx - c.offset) % c.ldc()) < c.n;
    if (!inside) {
      got_rest.push_back(got.c[idx]);
      want_rest.push_back(in.c0[idx]);
      if (c.pre_activation) {
        got_rest.push_back(got.pre_activation[idx]);
        want_rest.push_back(want.pre_activation[idx]);
      }
      continue;
    }
    const size_t i = (idx - c.offset) / c.ldc(), j = (idx - c.offset) % c.ldc();
    floor.push_back(1e-5 * ref.c_magnitude[i * c.n + j] + ref.c_slope_error[i * c.n + j] + kFp16SubnormalStep);
    got_c.push_back(got.c[idx]);
    want_c.push_back(want.c[idx]);
    if (c.pre_activation) {
      got_pre.push_back(got.pre_activation[idx]);
      want_pre.push_back(want.pre_activation[idx]);
    }
  }
  expect_close(
      fmt, got_c, want_c, fmt.rel_tol(), [&](size_t i) { return floor[i]; }, "C");
  if (c.pre_activation)
    expect_close(
        fmt, got_pre, want_pre, fmt.rel_tol(), [&](size_t i) { return floor[i]; }, "pre-activation");
  expect_halves_equal(fmt, got_rest, want_rest, "outside the m x n window");
  if (c.bias_grad) {
    std::vector<lowp16> got_db(got.bias_grad.begin() + c.offset, got.bias_grad.end()),
        want_db(want.bias_grad.begin() + c.offset, want.bias_grad.end());
    expect_close(
        fmt, got_db, want_db, fmt.rel_tol(),
        [&](size_t i) { return 1e-5 * ref.bias_grad_magnitude[i] + kFp16SubnormalStep; }, "bias_grad");
  }
}

// The model's three GEMMs (784-1024-1024-10 at batch 256, and odd widths)
// with their epilogues, plus odd shapes, every transpose, padded strides and
// 2-byte-aligned views (offset 1: cuBLASLt gets other algorithms or none).
void run_all_epilogues(CpuBackend& cpu, Backend& gpu, std::mt19937_64& rng) {
  // (The double reference behind the tolerances is the slow part: the full
  // batch runs once per epilogue, the unaligned views on a small batch.)
  const int layers[][2] = {{784, 1024}, {1024, 10}, {33, 17}};  // {in, out}
  for (const auto& l : layers)
    for (int rows : {256, 7})
      for (size_t offset : {size_t{0}, size_t{1}}) {
        if (rows == 256 && offset != 0) continue;
        const int in = l[0], out = l[1];
        for (Activation act : {Activation::Relu, Activation::Gelu}) {
          test::EpilogueCase fwd{rows, out, in};  // Y = act(X W^T + b) (+ Z)
          fwd.trans_b = Transpose::Yes;
          fwd.bias = true;
          fwd.act = act;
          fwd.offset = offset;
          fwd.pre_activation = act == Activation::Gelu;
          run_epilogue_case(cpu, gpu, rng, fwd, "forward");
          if (rows != 256) {
            fwd.pre_activation = !fwd.pre_activation;
            fwd.pad = 3;
            run_epilogue_case(cpu, gpu, rng, fwd, "forward, other pre-activation choice");
          }
          test::EpilogueCase dx{rows, in, out};  // dZ_prev = act'(Z) * (dZ W)
          dx.dact = act;
          dx.offset = offset;
          run_epilogue_case(cpu, gpu, rng, dx, "activation gradient");
        }
        for (bool accumulate : {false, true}) {
          test::EpilogueCase dw{out, in, rows};  // dW = dZ^T X, db = sum_rows dZ
          dw.trans_a = Transpose::Yes;
          dw.bias_grad = true;
          dw.bias_grad_accumulate = accumulate;
          dw.beta = accumulate ? 1.0f : 0.0f;
          dw.offset = offset;
          run_epilogue_case(cpu, gpu, rng, dw, "weight and bias gradient");
        }
      }
  for (Transpose ta : kBoth)
    for (Transpose tb : kBoth) {
      test::EpilogueCase c{37, 29, 65};
      c.trans_a = ta;
      c.trans_b = tb;
      c.bias = true;
      c.act = Activation::Relu;
      c.alpha = 0.75f;
      run_epilogue_case(cpu, gpu, rng, c, "relu, any transpose");
      c.act = Activation::Gelu;
      c.pre_activation = true;
      c.pad = 1;
      run_epilogue_case(cpu, gpu, rng, c, "gelu, any transpose");
      c.act = Activation::GeluTanh;
      run_epilogue_case(cpu, gpu, rng, c, "gelu-tanh, any transpose");
      c = test::EpilogueCase{37, 29, 65};
      c.trans_a = ta;
      c.trans_b = tb;
      c.dact = Activation::Gelu;
      c.alpha = -1.5f;
      run_epilogue_case(cpu, gpu, rng, c, "dgelu, any transpose");
      c.dact = Activation::GeluTanh;
      run_epilogue_case(cpu, gpu, rng, c, "dgelu-tanh, any transpose");
      c.dact = Activation::Gelu;
      c.dact = Activation::Relu;
      c.bias = true;
      c.pad = 2;
      run_epilogue_case(cpu, gpu, rng, c, "drelu with bias, any transpose");
      c.bias = false;
      c.pad = 0;
      c.dact = Activation::None;
      c.bias_grad = true;
      c.alpha = 1.0f;
      run_epilogue_case(cpu, gpu, rng, c, "bias gradient, any transpose");
    }
  test::EpilogueCase near_zero{64, 96, 1024};  // GELU's gradient where cdf + z pdf cancels, long sums
  near_zero.dact = Activation::Gelu;
  near_zero.z_near_gelu_prime_zero = true;
  run_epilogue_case(cpu, gpu, rng, near_zero, "dgelu near gelu'(z) = 0");
  near_zero.dact = Activation::GeluTanh;
  run_epilogue_case(cpu, gpu, rng, near_zero, "dgelu-tanh near its zero");
  // The GPT's MLP (C = 128, 4C wide, 64 rows): c_fc with bias + tanh GELU
  // keeping the pre-activation, and the gradient through it.
  test::EpilogueCase fc{64, 512, 128};
  fc.trans_b = Transpose::Yes;
  fc.bias = true;
  fc.act = Activation::GeluTanh;
  fc.pre_activation = true;
  run_epilogue_case(cpu, gpu, rng, fc, "GPT MLP c_fc forward");
  test::EpilogueCase proj{64, 128, 512};  // c_proj with its residual add: x += y W^T + b
  proj.trans_b = Transpose::Yes;
  proj.bias = true;
  proj.beta = 1.0f;
  run_epilogue_case(cpu, gpu, rng, proj, "GPT MLP c_proj + residual (bias, beta 1)");
  proj.offset = 1;  // an unaligned view: the staged bias, or the next route down
  run_epilogue_case(cpu, gpu, rng, proj, "c_proj + residual, unaligned");
  test::EpilogueCase fc_dx{64, 512, 128};
  fc_dx.dact = Activation::GeluTanh;
  run_epilogue_case(cpu, gpu, rng, fc_dx, "GPT MLP gradient into the tanh GELU");
  test::EpilogueCase zero_k{7, 9, 0};  // C = epilogue(bias), db = 0 (+ old)
  zero_k.bias = true;
  zero_k.act = Activation::Gelu;
  zero_k.pre_activation = true;
  zero_k.pad = 1;  // lda >= 1
  run_epilogue_case(cpu, gpu, rng, zero_k, "k = 0");
  test::EpilogueCase empty_c{7, 0, 9};  // no C, but a bias gradient
  empty_c.trans_a = Transpose::Yes;
  empty_c.bias_grad = true;
  empty_c.bias_grad_accumulate = true;
  empty_c.pad = 1;
  run_epilogue_case(cpu, gpu, rng, empty_c, "n = 0");
}

TEST_P(CudaLowpKernels, GemmEpiloguesMatchCpu) {
  SCOPED_TRACE(seed_text());
  run_all_epilogues(cpu, *gpu, rng);
}

class CudaEpilogueHarness : public ::testing::TestWithParam<Precision> {};

TEST_P(CudaEpilogueHarness, PassesCpuAgainstCpuWithOtherSummationOrder) {
  // Runs without a GPU: the comparison above (windows, padding, tolerances,
  // k = 0 and n = 0) with a two-thread CpuBackend, whose split GEMM sums in
  // another order, in the GPU's place. A harness bug shows here, not first
  // on a GPU machine.
  SCOPED_TRACE(seed_text());
  CpuBackend one(1, GetParam()), two(2, GetParam());
  std::mt19937_64 rng(test::test_seed());
  run_all_epilogues(one, two, rng);
}

TEST_P(CudaLowpKernels, GemmEpiloguesOnSimpleFallbackKernel) {
  SCOPED_TRACE(seed_text());
  // The CUDA-core kernel implements the whole contract on its own, for
  // shapes cuBLASLt offers nothing for.
  gpu->force_simple_gemm_for_testing(true);
  run_all_epilogues(cpu, *gpu, rng);
  gpu->force_simple_gemm_for_testing(false);
}

// Every route's count must be the expected one (0 where not listed). A
// GEMM whose fused cuBLASLt route found no algorithm still gives correct
// results on the next route down (cuda_gemm.h), so only this shows it; the
// missing algorithm itself is named on stderr.
void expect_routes(const GemmRouteCounts& got, std::initializer_list<std::pair<GemmRoute, int64_t>> want,
                   const std::string& what) {
  GemmRouteCounts expected;
  for (const auto& w : want) expected.calls[static_cast<size_t>(w.first)] = w.second;
  for (int r = 0; r < kGemmRouteCount; ++r) {
    const auto route = static_cast<GemmRoute>(r);
    EXPECT_EQ(got[route], expected[route]) << what << ": GEMM calls on route \"" << gemm_route_name(route) << "\"";
  }
}

// Values i/8 with |i| <= 8 (exact in FP16 and BF16): products are multiples of 1/64 of
// magnitude <= 1, so a sum of k of them (plus such a bias) is a multiple of
// 1/64 below k + 1: exact in FP32, in any order, while 64 (k + 1) < 2^24.
std::vector<lowp16> random_eighths(const LowpFormat& fmt, std::mt19937_64& rng, size_t count) {
  std::vector<lowp16> out(count);
  for (auto& h : out) h = fmt.narrow(static_cast<float>(static_cast<int>(rng() % 17) - 8) / 8.0f);
  return out;
}

TEST_P(CudaLowpKernels, GemmFusedReluMatchesCpuBitwiseWhereSumsAgree) {
  SCOPED_TRACE(seed_text());
  // Every sum is exact (random_eighths), so there is no summation order to
  // differ in: the GPU's fused relu(bias + sum) and its relu' must give the
  // CPU's bits (one RNE rounding of the same FP32 value on both). k = 64 with
  // packed 128-byte rows and cudaMalloc'd operands is a layout cuBLASLt has
  // algorithms for, and the route counts check the fused route really ran
  // (k = 1, lda = ldb = 1, could leave it to the simple kernel).
  for (bool grad : {false, true}) {
    test::EpilogueCase c{64, 96, 64};
    c.trans_b = Transpose::Yes;
    if (grad)
      c.dact = Activation::Relu;
    else {
      c.bias = true;
      c.act = Activation::Relu;
    }
    auto in = test::make_epilogue_inputs(rng, c, fmt);
    in.a = random_eighths(fmt, rng, in.a.size());
    in.b = random_eighths(fmt, rng, in.b.size());
    in.bias = random_eighths(fmt, rng, in.bias.size());
    const auto before = gpu->gemm_route_counts_for_testing();
    const auto got = test::run_epilogue_case(*gpu, c, in).c;
    expect_routes(gpu->gemm_route_counts_for_testing().since(before),
                  {{grad ? GemmRoute::kLtThenReluGradientInPlace : GemmRoute::kLtReluBias, 1}},
                  grad ? "relu gradient" : "relu forward");
    expect_halves_equal(fmt, got, test::run_epilogue_case(cpu, c, in).c, grad ? "relu gradient" : "relu forward");
  }
}

TEST_P(CudaLowpKernels, ModelGemmsTakeTheFusedCublasLtRoutes) {
  SCOPED_TRACE(seed_text());
  // MlpModel's own GEMMs, 784-1024-1024-10 with ReLU at batch 256, as the
  // trainer issues them (the flat parameter buffers, their views' offsets):
  // each must take the route cuda_gemm.h intends for it, not a fallback.
  const int rows = 256;
  MlpConfig mlp;
  mlp.layer_widths = {784, 1024, 1024, 10};
  MlpModel model(*gpu, mlp, rows);
  ParameterStore params(*gpu, model.parameters());
  params.set_master_weights(model.parameters().initial_values(test::test_seed()));
  const ParameterTables tables =
      ParameterTables::flat(params.weights_lowp.data(), params.grads_lowp.data(), model.parameters());
  Buffer<lowp16> x(*gpu, static_cast<size_t>(rows) * model.input_width());
  x.upload(fmt.random(rng, x.count()));
  DeviceBatch batch;
  batch.features_lowp = x.data();
  batch.rows = rows;

  auto routes = gpu->gemm_route_counts_for_testing();
  model.forward(batch, tables.weights_lowp);
  // Hidden layers: Z = X W^T + b with ReLU in one RELU_BIAS call; the
  // logits: BIAS.
  auto now = gpu->gemm_route_counts_for_testing();
  expect_routes(now.since(routes), {{GemmRoute::kLtReluBias, 2}, {GemmRoute::kLtBias, 1}}, "forward");

  const auto dlogits = fmt.random(rng, static_cast<size_t>(rows) * model.output_width());
  gpu->copy_to_device(model.output_grad(), dlogits.data(), dlogits.size() * sizeof(lowp16));
  // BGRADB needs a 16-byte-aligned bias-gradient vector. The flat gradient
  // buffer is cudaMalloc'd (256-byte aligned) and the parameter registry
  // starts every tensor at a multiple of 8 elements, so every layer's bias
  // gradient qualifies (before the registry padded, only the last layer's did).
  int64_t bgradb_layers = 0;
  for (const ParameterTensor& t : model.parameters().tensors())
    bgradb_layers += t.shape.size() == 1 && (t.offset * sizeof(lowp16)) % 16 == 0;
  const int64_t layers = model.layer_count();
  EXPECT_EQ(bgradb_layers, layers) << "a bias the registry left unaligned";

  routes = gpu->gemm_route_counts_for_testing();
  model.backward(tables.weights_lowp, tables.grads_lowp, /*accumulate=*/false, nullptr);
  // dW with db by BGRADB in the same call on every layer; dX (layers 2 and
  // 3) as the plain GEMM, then relu' in place.
  now = gpu->gemm_route_counts_for_testing();
  expect_routes(now.since(routes), {{GemmRoute::kLtBgradb, layers}, {GemmRoute::kLtThenReluGradientInPlace, 2}},
                "backward");

  routes = now;
  model.backward(tables.weights_lowp, tables.grads_lowp, /*accumulate=*/true, nullptr);
  // --grad-accum > 1: dW adds to the gradients (beta 1), which BGRADB cannot
  // (it writes the vector), so db comes from the bias-gradient kernel.
  now = gpu->gemm_route_counts_for_testing();
  expect_routes(now.since(routes),
                {{GemmRoute::kLt, 3}, {GemmRoute::kBiasGradKernel, 3}, {GemmRoute::kLtThenReluGradientInPlace, 2}},
                "accumulating backward");
  gpu->synchronize();
}

INSTANTIATE_TEST_SUITE_P(Precisions, CudaEpilogueHarness, ::testing::ValuesIn(kBothPrecisions), precision_test_name);

}  // namespace
}  // namespace ddp
