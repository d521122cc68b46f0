// cuda_test_transformer_kernels.cpp: CudaBackend's GPT operations against
// CpuBackend on the same fresh random inputs (transformer_compare_support.h,
// attention_compare_support.h: the comparisons and their tolerances), at
// small odd shapes and at GPT-2 widths (the decoder's attention against a
// cache among them); the tanh GELU element-wise; and the
// same harness with a one-thread against a two-thread CpuBackend, which runs
// without a GPU, so a harness bug shows here first.
#include <gtest/gtest.h>

#include <string>

#include "attention_compare_support.h"
#include "cuda_test_support.h"
#include "support/gemm_epilogue_support.h"
#include "transformer_compare_support.h"

namespace ddp {
namespace {

using namespace test;

void compare_all_transformer_ops(CpuBackend& ref, Backend& dut, std::mt19937_64& rng) {
  compare_embeddings(ref, dut, rng, 3, 17, 37, 11);
  compare_embeddings(ref, dut, rng, 4, 64, 768, 256);  // GPT-2 width, byte vocabulary
  compare_layernorm(ref, dut, rng, 33, 37);
  compare_layernorm(ref, dut, rng, 130, 768);  // three row chunks of the CUDA parameter sums
  compare_residual_and_permutes(ref, dut, rng);
  compare_padded_cross_entropy(ref, dut, rng, 19, 64, 50);
  compare_padded_cross_entropy(ref, dut, rng, 8, 50304, 50257);  // GPT-2's padded vocabulary
  for (Transpose ta : kBoth)
    for (Transpose tb : kBoth) {
      compare_batched_gemm(ref, dut, rng, 6, 64, 64, 32, ta, tb, 0.17677669f, 0.0f, 0);  // aligned, packed
      compare_batched_gemm(ref, dut, rng, 5, 17, 9, 13, ta, tb, 1.0f, 1.0f, 3);          // odd: 2-byte aligned
    }
  compare_causal_softmax(ref, dut, rng, 3, 37, 16);
  compare_causal_softmax(ref, dut, rng, 2, 256, 64);
  compare_attention_decode(ref, dut, rng, 3, 16, 0, 1);     // the first token
  compare_attention_decode(ref, dut, rng, 2, 24, 37, 1);    // one step, odd lengths
  compare_attention_decode(ref, dut, rng, 3, 16, 0, 21);    // a prefill
  compare_attention_decode(ref, dut, rng, 2, 40, 9, 5);     // head_size past a warp
  compare_attention_decode(ref, dut, rng, 12, 64, 700, 1);  // GPT-2 heads, a long cache
}

TEST_P(CudaLowpKernels, TransformerOperationsMatchCpu) {
  SCOPED_TRACE(seed_text());
  compare_all_transformer_ops(cpu, *gpu, rng);
}

class CudaTransformerHarness : public ::testing::TestWithParam<Precision> {};

TEST_P(CudaTransformerHarness, PassesCpuAgainstCpuWithOtherThreadCount) {
  // Runs without a GPU: the comparisons above with a two-thread CpuBackend
  // in the GPU's place.
  SCOPED_TRACE(seed_text());
  CpuBackend one(1, GetParam()), two(2, GetParam());
  std::mt19937_64 rng(test::test_seed());
  compare_all_transformer_ops(one, two, rng);
}

TEST_P(CudaLowpKernels, BatchedGemmTakesTheBatchedCublasLtRoute) {
  // A silent fallback to the simple kernel once per product would still
  // pass the comparisons: count the route.
  SCOPED_TRACE(seed_text());
  const auto before = gpu->gemm_route_counts_for_testing();
  compare_batched_gemm(cpu, *gpu, rng, 12, 128, 128, 64, Transpose::No, Transpose::Yes, 0.125f, 0.0f, 0);
  const auto taken = gpu->gemm_route_counts_for_testing().since(before);
  EXPECT_EQ(taken[GemmRoute::kLtBatched], 1);
  EXPECT_EQ(taken[GemmRoute::kSimpleGemm], 0);
}

TEST_P(CudaLowpKernels, BatchedGemmOnSimpleFallbackKernel) {
  SCOPED_TRACE(seed_text());
  gpu->force_simple_gemm_for_testing(true);
  compare_batched_gemm(cpu, *gpu, rng, 4, 33, 17, 9, Transpose::Yes, Transpose::No, 1.0f, 0.5f, 1);
  gpu->force_simple_gemm_for_testing(false);
}

INSTANTIATE_TEST_SUITE_P(Precisions, CudaTransformerHarness, ::testing::ValuesIn(kBothPrecisions), precision_test_name);

}  // namespace
}  // namespace ddp
