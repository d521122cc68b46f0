// cuda_gemm.h: the row-major 16-bit GEMM of backend.h (GemmLowp) on cuBLASLt.
//
// cuBLASLt is column-major. A row-major [r, c] matrix with row stride ld is
// the column-major [c, r] matrix with the same ld, i.e. its transpose, so
//   C = op(A) op(B)   (row-major)   <=>   C^T = op(B)^T op(A)^T   (column-major)
// and we hand cuBLASLt B as its "A", A as its "B", with m and n swapped; the
// transpose flags carry over unchanged. The bias epilogue adds a vector as
// long as the column-major D has rows, which after the swap is n: exactly a
// per-column bias of the row-major C. BGRADB sums cuBLASLt's B (our A) over
// k into a vector as long as D has columns, m: the row sums of our op(A),
// i.e. GemmLowp::bias_grad (db = sum_rows dY in the dW = dY^T X GEMM, the
// form apex's fused_dense uses for its weight gradient).
//
// Epilogues (backend.h, gemm_epilogue.h), and where each runs:
// - bias: CUBLASLT_EPILOGUE_BIAS (a 16-bit bias at an unaligned view is
//   staged to an aligned copy first), with any beta: cuBLASLt adds the bias
//   to alpha * A B + beta * C before the rounding, the order of backend.h
//   (beta 1: the residual add fused into a projection).
// - ReLU forward without a pre-activation output: RELU / RELU_BIAS. ReLU
//   commutes with the rounding, so this is the CPU result bit for bit (up to
//   the GEMM's summation order).
// - bias gradient alone, not accumulating, alpha 1, beta 0, 16-byte-aligned
//   output: BGRADB in the same GEMM. It sums the 16-bit values of A in FP32
//   (a different order from the CPU's, covered by the tests' tolerance).
// - ReLU gradient: the plain GEMM (+ BIAS) rounds C, then
//   launch_relu_gradient_in_place_lowp zeroes where relu'(z) = 0: the same
//   bits as fusing it (relu' is 0 or 1), at the traffic of the old pass.
// - everything else with an activation part (GELU forward and gradient, a
//   pre-activation output): the GEMM writes FP32 D to a scratch
//   buffer and launch_gemm_epilogue_lowp applies gemm_epilogue_element and
//   rounds once. Not cuBLASLt's own epilogues, on purpose: its GELU and
//   DGELU use the tanh approximation (PyTorch's _addmm_activation matches
//   gelu(approximate='tanh') for that reason), ours is the erf form; DRELU
//   needs the RELU_AUX bit-mask, which would have to be kept next to Y and
//   whose bit is set from the FP32 value (a different relu' from the one
//   read from Y for the few values that round to zero). Costs one FP32
//   write and read of the output, against the separate pass it replaces.
//   The erf GELU (Activation::Gelu, the MLP's) therefore never reaches
//   cuBLASLt's GELU epilogue. GPT-2's tanh GELU (Activation::GeluTanh) is
//   the function cuBLASLt's GELU computes, but it takes this same route for
//   now: one code path (gemm_epilogue_element) for CPU and CUDA, and GELU_AUX
//   would keep cuBLASLt's own pre-activation format; moving GeluTanh
//   forward to CUBLASLT_EPILOGUE_GELU_AUX_BIAS is an optimisation to
//   measure on a GPU against this route.
// - a bias gradient BGRADB cannot take: launch_bias_grad_op_a_lowp, the
//   column-sum kernel on A (FP32, 16 row lanes per output, so another
//   summation order than the CPU's, as BGRADB's is).
// Where cuBLASLt's heuristic offers no algorithm for a fused epilogue, the
// next route down is taken (RELU_BIAS -> FP32 route; BGRADB -> plain GEMM +
// bias-gradient kernel), and where it offers none at all, the CUDA-core
// kernel of cuda_gemm_simple.cu, which implements the whole contract.
// Falling back is silent apart from one stderr line per plan, so each call's
// route is counted (route_counts(), cuda_gemm_route.h) for tests to assert
// that the fused routes run.
//
// Numerics: FP16 or BF16 (CUDA_R_16F, CUDA_R_16BF: the backend's
// precision) A/B/C/D, CUBLAS_COMPUTE_32F with FP32 alpha/beta (Tensor
// Cores, FP32 accumulation). Split-K schemes that would sum partial results
// in 16 bits (INPLACE, OUTPUT_TYPE) are excluded, so there is one rounding
// to 16 bits at the end, as the numerics contract and CpuBackend have it.
//
// Plans (descriptors, layouts, chosen algorithm) are cached per shape,
// strides, transposes, epilogue, output type, beta use and pointer
// alignment (epilogue vector included), so steady-state training creates no
// descriptors and queries no heuristics.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>

#include <cublasLt.h>
#include <cuda_runtime.h>

#include "kernels/backend.h"
#include "kernels/gemm_lowp.h"
#include "kernels/lowp_codec.h"
#include "kernels/cuda/cuda_gemm_route.h"
#include "kernels/cuda/cuda_raii.h"
#include "kernels/graph_safe_growth.h"

namespace ddp {

// Plain CUDA-core GEMM with the same contract (FP32 sums of exact products,
// beta*C and bias in FP32, one rounding). Used where cuBLASLt has no
// algorithm for a layout/alignment, for k == 0, and by tests. Slow; it is a
// fallback, not a path for training.
void launch_simple_gemm_lowp(Precision p, const GemmLowp& g, cudaStream_t stream);
// C = epilogue(acc_fp32) for acc_fp32 = alpha * op(A) op(B), [m, n] packed
// FP32 (cuda_gemm_epilogue.cu). g.beta must be 0.
void launch_gemm_epilogue_lowp(Precision p, const GemmLowp& g, const float* acc_fp32, cudaStream_t stream);
// C = relu'(dact_input) * C in place, on C already rounded by a plain GEMM
// (+ bias): the bits of the fused ReLU gradient (cuda_gemm_epilogue.cu).
void launch_relu_gradient_in_place_lowp(Precision p, const GemmLowp& g, cudaStream_t stream);
// g.bias_grad = row sums of op(A) (+ g.bias_grad when accumulating), FP32,
// by launch_column_sums_lowp on A's strided view (cuda_gemm_epilogue.cu):
// deterministic, but not the CPU's summation order.
void launch_bias_grad_op_a_lowp(Precision p, const GemmLowp& g, cudaStream_t stream);

class CublasLtGemm {
 public:
  // A, B and C (and the epilogue vectors) hold `precision`'s format.
  CublasLtGemm(size_t workspace_bytes, Precision precision);
  ~CublasLtGemm();
  CublasLtGemm(const CublasLtGemm&) = delete;
  CublasLtGemm& operator=(const CublasLtGemm&) = delete;

  // Queues g on `stream`. Throws ddp::Error on bad arguments or a cuBLAS error.
  void run(const GemmLowp& g, cudaStream_t stream);
  // The gemm_batched_lowp op (ops/gemm.h): one cuBLASLt call over batch_count products
  // (CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT / STRIDED_BATCH_OFFSET on the three
  // layouts), no epilogue; where cuBLASLt has no algorithm, the simple
  // kernel once per product.
  void run_batched(const GemmLowp& g, int batch_count, int64_t stride_a, int64_t stride_b, int64_t stride_c,
                   cudaStream_t stream);
  // The gemm_lowp_to_fp32 op (ops/gemm.h): one cuBLASLt call with 16-bit A and B and FP32
  // C = D = c_fp32 (row stride g.ldc), beta read from it. No fallback: a
  // shape cuBLASLt has no algorithm for throws, naming it (16 x 16 bits ->
  // FP32 under CUBLAS_COMPUTE_32F is one of its listed combinations).
  void run_to_fp32(const GemmLowp& g, float* c_fp32, cudaStream_t stream);

  void force_simple(bool on) { force_simple_ = on; }
  // Set by CudaBackend before each call: whether a stream capture is in
  // progress or a captured graph exists. The scratch and staging buffers
  // then refuse to grow (graph_safe_growth.h) instead of freeing a block a
  // graph may still use.
  void set_capture_state(CaptureState state) { capture_state_ = state; }
  size_t cached_plans() const { return plans_.size(); }
  // Which route each call took (cuda_gemm_route.h), for tests.
  const GemmRouteCounts& route_counts() const { return route_counts_; }

 private:
  struct Key {
    int trans_a, trans_b, m, n, k, lda, ldb, ldc;
    uint32_t epilogue;  // cublasLtEpilogue_t
    int d_fp32;         // D is the FP32 accumulator scratch (ld n), not our C
    int beta_nonzero;
    // Largest power of two (<= 256) dividing each address: the heuristic
    // picks algorithms for the alignment it is told, and one chosen for
    // 256-byte-aligned pointers may fault on a view at an odd offset. The
    // epilogue vector (bias, or bias gradient) counts too.
    int align_a, align_b, align_c, align_epilogue;
    // Strided batches (run_batched); 1 and 0 otherwise. The alignments
    // above then hold for every product (the strides' too).
    int batch_count = 1;
    int64_t stride_a = 0, stride_b = 0, stride_c = 0;
    bool operator<(const Key& o) const;
  };
  struct Plan;

  // D is g.c, or with d_fp32 the accumulator scratch (cudaMalloc'd, so
  // 256-byte aligned: the key, and the plan, need not wait for it to exist).
  Key make_key(const GemmLowp& g, uint32_t epilogue, const void* epilogue_vector, bool d_fp32) const;
  Plan& plan_for(const Key& key, const GemmLowp& g, const void* epilogue_vector);
  // Queues C = epilogue(...) and returns the route it took; kLtBgradb means
  // it also wrote g.bias_grad.
  GemmRoute run_product(const GemmLowp& g, cudaStream_t stream);
  // cublasLtMatmul with the plan's algorithm; false, with nothing queued and
  // the plan turned to the simple route (said once), when cuBLASLt answers
  // NOT_SUPPORTED at the call itself rather than in the heuristic.
  bool matmul(Plan& plan, const GemmLowp& g, const void* beta, const void* c, void* d, cudaStream_t stream);
  // One cuBLASLt call with 16-bit D = our C and the given epilogue (its vector
  // in BIAS_POINTER); false, with nothing queued, when there is no algorithm.
  bool try_lt(const GemmLowp& g, uint32_t epilogue, const void* epilogue_vector, cudaStream_t stream);
  // cuBLASLt into the FP32 scratch, then launch_gemm_epilogue_lowp; false,
  // with nothing queued, when there is no algorithm.
  bool try_fp32_then_epilogue(const GemmLowp& g, cudaStream_t stream);
  // cuBLASLt's bias epilogue wants a 16-byte-aligned bias; a bias view at an
  // odd offset of the flat parameter buffer is copied here first. Grown on
  // demand, as the scratch below: both throw where capture_state_ forbids it.
  const lowp16* aligned_bias(const lowp16* bias, int n, cudaStream_t stream);
  // FP32 [count] scratch for the accumulator route, grown on demand.
  float* accumulator_scratch(size_t count, cudaStream_t stream);

  Precision precision_;
  cublasLtHandle_t handle_ = nullptr;
  size_t workspace_bytes_ = 0;
  UniqueDeviceMemory workspace_;
  UniqueDeviceMemory bias_staging_;
  size_t bias_staging_count_ = 0;
  UniqueDeviceMemory accumulator_fp32_;
  size_t accumulator_count_ = 0;
  std::map<Key, std::unique_ptr<Plan>> plans_;
  bool force_simple_ = false;
  GemmRouteCounts route_counts_;
  CaptureState capture_state_ = CaptureState::kNone;
};

}  // namespace ddp
