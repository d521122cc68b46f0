// cuda_gemm.h: the row-major FP16 GEMM of backend.h (GemmFp16) on cuBLASLt.
//
// cuBLASLt is column-major. A row-major [r, c] matrix with row stride ld is
// the column-major [c, r] matrix with the same ld, i.e. its transpose, so
//   C = op(A) op(B)   (row-major)   <=>   C^T = op(B)^T op(A)^T   (column-major)
// and we hand cuBLASLt B as its "A", A as its "B", with m and n swapped; the
// transpose flags carry over unchanged. The bias epilogue adds a vector as
// long as the column-major D has rows, which after the swap is n: exactly a
// per-column bias of the row-major C.
//
// Numerics: FP16 A/B/C/D, CUBLAS_COMPUTE_32F with FP32 alpha/beta (Tensor
// Cores, FP32 accumulation). Split-K schemes that would sum partial results
// in FP16 (INPLACE, OUTPUT_TYPE) are excluded, so there is one rounding to
// FP16 at the end, as the numerics contract and CpuBackend have it.
//
// Plans (descriptors, layouts, chosen algorithm) are cached per shape,
// strides, transposes, bias/beta use and pointer alignment, so steady-state
// training creates no descriptors and queries no heuristics.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>

#include <cublasLt.h>
#include <cuda_runtime.h>

#include "kernels/backend.h"
#include "kernels/cuda_raii.h"

namespace ddp {

// Plain CUDA-core GEMM with the same contract (FP32 sums of exact products,
// beta*C and bias in FP32, one rounding). Used where cuBLASLt has no
// algorithm for a layout/alignment, for k == 0, and by tests. Slow; it is a
// fallback, not a path for training.
void launch_simple_gemm_fp16(const GemmFp16& g, cudaStream_t stream);

class CublasLtGemm {
 public:
  explicit CublasLtGemm(size_t workspace_bytes);
  ~CublasLtGemm();
  CublasLtGemm(const CublasLtGemm&) = delete;
  CublasLtGemm& operator=(const CublasLtGemm&) = delete;

  // Queues g on `stream`. Throws ddp::Error on bad arguments or a cuBLAS error.
  void run(const GemmFp16& g, cudaStream_t stream);

  void force_simple(bool on) { force_simple_ = on; }
  size_t cached_plans() const { return plans_.size(); }

 private:
  struct Key {
    int trans_a, trans_b, m, n, k, lda, ldb, ldc;
    int has_bias, beta_nonzero;
    // Largest power of two (<= 256) dividing each address: the heuristic
    // picks algorithms for the alignment it is told, and one chosen for
    // 256-byte-aligned pointers may fault on a view at an odd offset.
    int align_a, align_b, align_c, align_bias;
    bool operator<(const Key& o) const;
  };
  struct Plan;

  Plan& plan_for(const Key& key, const GemmFp16& g, const half16* bias);
  // cuBLASLt's bias epilogue wants a 16-byte-aligned bias; a bias view at an
  // odd offset of the flat parameter buffer is copied here first.
  const half16* aligned_bias(const half16* bias, int n, cudaStream_t stream);

  cublasLtHandle_t handle_ = nullptr;
  size_t workspace_bytes_ = 0;
  UniqueDeviceMemory workspace_;
  UniqueDeviceMemory bias_staging_;
  size_t bias_staging_count_ = 0;
  std::map<Key, std::unique_ptr<Plan>> plans_;
  bool force_simple_ = false;
};

}  // namespace ddp
