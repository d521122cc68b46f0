// cuda_gemm_route.h: the routes a GemmLowp can take through CublasLtGemm
// (cuda_gemm.h explains when each is taken) and a count per route. Where
// cuBLASLt's heuristic offers no algorithm, a GEMM silently takes the next
// route down and still gives correct results, so only these counts let a
// test assert that the fused cuBLASLt epilogues really ran. Plain C++: tests
// read it without CUDA headers.
#pragma once

#include <array>
#include <cstdint>

namespace ddp {

enum class GemmRoute : int {
  kLt,                         // try_lt, no cuBLASLt epilogue (alpha/beta only)
  kLtBias,                     // try_lt with CUBLASLT_EPILOGUE_BIAS
  kLtRelu,                     // try_lt with CUBLASLT_EPILOGUE_RELU
  kLtReluBias,                 // try_lt with CUBLASLT_EPILOGUE_RELU_BIAS
  kLtBgradb,                   // try_lt with CUBLASLT_EPILOGUE_BGRADB: the bias gradient in the same call
  kLtThenReluGradientInPlace,  // try_lt (DEFAULT or BIAS), then launch_relu_gradient_in_place_lowp
  kLtFp32ThenEpilogue,         // try_fp32_then_epilogue: FP32 scratch, then launch_gemm_epilogue_lowp
  kSimpleGemm,                 // launch_simple_gemm_lowp (forced, k == 0, or no cuBLASLt algorithm)
  kBiasGradKernel,             // launch_bias_grad_op_a_lowp, for a bias gradient BGRADB did not write
  kLtBatched,                  // run_batched: one strided-batched cuBLASLt call
  kLtToFp32,                   // run_to_fp32: one cuBLASLt call, FP32 C and D
  kCount
};

constexpr int kGemmRouteCount = static_cast<int>(GemmRoute::kCount);

inline const char* gemm_route_name(GemmRoute route) {
  switch (route) {
    case GemmRoute::kLt:
      return "cuBLASLt";
    case GemmRoute::kLtBias:
      return "cuBLASLt BIAS";
    case GemmRoute::kLtRelu:
      return "cuBLASLt RELU";
    case GemmRoute::kLtReluBias:
      return "cuBLASLt RELU_BIAS";
    case GemmRoute::kLtBgradb:
      return "cuBLASLt BGRADB";
    case GemmRoute::kLtThenReluGradientInPlace:
      return "cuBLASLt + relu' in place";
    case GemmRoute::kLtFp32ThenEpilogue:
      return "cuBLASLt FP32 scratch + epilogue kernel";
    case GemmRoute::kSimpleGemm:
      return "simple CUDA-core GEMM";
    case GemmRoute::kBiasGradKernel:
      return "bias-gradient kernel";
    case GemmRoute::kLtBatched:
      return "cuBLASLt strided batched";
    case GemmRoute::kLtToFp32:
      return "cuBLASLt FP32 output";
    case GemmRoute::kCount:
      break;
  }
  return "?";
}

// How many GEMM calls took each route since the backend was made. A call
// counts once for its product (C) and, when BGRADB did not write its bias
// gradient, once more for kBiasGradKernel; an empty C (n == 0) counts only
// the latter. Counted per queued call on the host: a replayed CUDA graph
// adds nothing.
struct GemmRouteCounts {
  std::array<int64_t, kGemmRouteCount> calls{};

  int64_t operator[](GemmRoute route) const { return calls[static_cast<size_t>(route)]; }
  void add(GemmRoute route) { ++calls[static_cast<size_t>(route)]; }
  // Calls taken since `earlier`, route by route.
  GemmRouteCounts since(const GemmRouteCounts& earlier) const {
    GemmRouteCounts d;
    for (size_t r = 0; r < calls.size(); ++r) d.calls[r] = calls[r] - earlier.calls[r];
    return d;
  }
};

}  // namespace ddp
