// cuda_gemm.cpp: cuBLASLt plans and calls for GemmFp16 (see cuda_gemm.h for
// the row-major <-> column-major mapping and the numerics).
#include "kernels/cuda_gemm.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <tuple>

#include "kernels/cuda_check.h"
#include "kernels/error.h"

namespace ddp {
namespace {

constexpr int kHeuristicResults = 8;
// cuBLASLt's default minimum alignment assumption; also our cap.
constexpr int kMaxAlignment = 256;
constexpr int kBiasAlignment = 16;

int pointer_alignment(const void* ptr) {
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  if (address == 0) return kMaxAlignment;
  const uintptr_t lowest_bit = address & (~address + 1);
  return static_cast<int>(std::min<uintptr_t>(lowest_bit, kMaxAlignment));
}

cublasOperation_t to_cublas(Transpose t) { return t == Transpose::Yes ? CUBLAS_OP_T : CUBLAS_OP_N; }

std::string describe(const GemmFp16& g) {
  return "m=" + std::to_string(g.m) + " n=" + std::to_string(g.n) + " k=" + std::to_string(g.k) +
         " trans_a=" + (g.trans_a == Transpose::Yes ? "T" : "N") + " trans_b=" +
         (g.trans_b == Transpose::Yes ? "T" : "N") + " lda=" + std::to_string(g.lda) +
         " ldb=" + std::to_string(g.ldb) + " ldc=" + std::to_string(g.ldc);
}

void validate(const GemmFp16& g) {
  DDP_REQUIRE(g.m >= 0 && g.n >= 0 && g.k >= 0, "gemm_fp16: negative dimension (" + describe(g) + ")");
  // Row-major stored shapes: A is m x k (k x m when transposed), B is k x n
  // (n x k when transposed), C is m x n; a row stride must cover a row.
  const int a_cols = g.trans_a == Transpose::No ? g.k : g.m;
  const int b_cols = g.trans_b == Transpose::No ? g.n : g.k;
  DDP_REQUIRE(g.lda >= std::max(1, a_cols), "gemm_fp16: lda smaller than a row of stored A (" + describe(g) + ")");
  DDP_REQUIRE(g.ldb >= std::max(1, b_cols), "gemm_fp16: ldb smaller than a row of stored B (" + describe(g) + ")");
  DDP_REQUIRE(g.ldc >= std::max(1, g.n), "gemm_fp16: ldc smaller than a row of C (" + describe(g) + ")");
  DDP_REQUIRE(g.bias == nullptr || g.beta == 0.0f, "gemm_fp16: a bias epilogue needs beta == 0");
  if (g.m == 0 || g.n == 0) return;  // nothing is read or written: pointers may be null
  DDP_REQUIRE(g.c != nullptr, "gemm_fp16: null C");
  DDP_REQUIRE(g.k == 0 || (g.a != nullptr && g.b != nullptr), "gemm_fp16: null A or B");
}

template <class T>
void set_desc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const T& value) {
  DDP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(value)));
}

template <class T>
void set_pref(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const T& value) {
  DDP_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof(value)));
}

cublasLtMatrixLayout_t make_layout(uint64_t rows, uint64_t cols, int64_t ld) {
  cublasLtMatrixLayout_t layout = nullptr;
  DDP_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout, CUDA_R_16F, rows, cols, ld));
  return layout;
}

}  // namespace

bool CublasLtGemm::Key::operator<(const Key& o) const {
  return std::tie(trans_a, trans_b, m, n, k, lda, ldb, ldc, has_bias, beta_nonzero, align_a, align_b, align_c,
                  align_bias) < std::tie(o.trans_a, o.trans_b, o.m, o.n, o.k, o.lda, o.ldb, o.ldc, o.has_bias,
                                         o.beta_nonzero, o.align_a, o.align_b, o.align_c, o.align_bias);
}

// Descriptors in cuBLASLt's column-major terms: its A is our B, its B our A.
struct CublasLtGemm::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t lt_a = nullptr;  // our B as stored
  cublasLtMatrixLayout_t lt_b = nullptr;  // our A as stored
  cublasLtMatrixLayout_t lt_c = nullptr;  // our C as stored, also D (in place)
  cublasLtMatmulAlgo_t algo{};
  bool use_simple = false;  // cuBLASLt has no algorithm for this case

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (lt_c) DDP_CUBLAS_CHECK_NOTHROW(cublasLtMatrixLayoutDestroy(lt_c));
    if (lt_b) DDP_CUBLAS_CHECK_NOTHROW(cublasLtMatrixLayoutDestroy(lt_b));
    if (lt_a) DDP_CUBLAS_CHECK_NOTHROW(cublasLtMatrixLayoutDestroy(lt_a));
    if (desc) DDP_CUBLAS_CHECK_NOTHROW(cublasLtMatmulDescDestroy(desc));
  }
};

CublasLtGemm::CublasLtGemm(size_t workspace_bytes) : workspace_bytes_(workspace_bytes) {
  workspace_ = cuda_malloc_unique(workspace_bytes_);
  DDP_CUBLAS_CHECK(cublasLtCreate(&handle_));
}

CublasLtGemm::~CublasLtGemm() {
  plans_.clear();
  if (handle_) DDP_CUBLAS_CHECK_NOTHROW(cublasLtDestroy(handle_));
}

CublasLtGemm::Plan& CublasLtGemm::plan_for(const Key& key, const GemmFp16& g, const half16* bias) {
  auto found = plans_.find(key);
  if (found != plans_.end()) return *found->second;

  auto plan = std::make_unique<Plan>();
  DDP_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  set_desc(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, static_cast<int32_t>(to_cublas(g.trans_b)));
  set_desc(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, static_cast<int32_t>(to_cublas(g.trans_a)));
  if (bias) {
    // The bias type defaults to D's type (FP16), which is what we pass.
    set_desc(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, static_cast<uint32_t>(CUBLASLT_EPILOGUE_BIAS));
    // The heuristic reads the pointer's value (not its data) for alignment.
    set_desc(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, static_cast<const void*>(bias));
  }
  // Column-major views of the row-major storage (rows/cols swapped).
  const bool a_t = g.trans_a == Transpose::Yes, b_t = g.trans_b == Transpose::Yes;
  plan->lt_a = make_layout(b_t ? g.k : g.n, b_t ? g.n : g.k, g.ldb);
  plan->lt_b = make_layout(a_t ? g.m : g.k, a_t ? g.k : g.m, g.lda);
  plan->lt_c = make_layout(g.n, g.m, g.ldc);

  cublasLtMatmulPreference_t pref = nullptr;
  DDP_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  cublasLtMatmulHeuristicResult_t results[kHeuristicResults] = {};
  int returned = 0;
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  try {
    set_pref(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<uint64_t>(workspace_bytes_));
    // NONE (no split-K) always passes the mask; allow only split-K whose
    // partial sums stay FP32 (COMPUTE_TYPE), never FP16 (INPLACE/OUTPUT_TYPE).
    set_pref(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
             static_cast<uint32_t>(CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE));
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, static_cast<uint32_t>(key.align_b));
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, static_cast<uint32_t>(key.align_a));
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, static_cast<uint32_t>(key.align_c));
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, static_cast<uint32_t>(key.align_c));
    status = cublasLtMatmulAlgoGetHeuristic(handle_, plan->desc, plan->lt_a, plan->lt_b, plan->lt_c, plan->lt_c,
                                            pref, kHeuristicResults, results, &returned);
  } catch (...) {
    DDP_CUBLAS_CHECK_NOTHROW(cublasLtMatmulPreferenceDestroy(pref));
    throw;
  }
  DDP_CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));

  // NOT_SUPPORTED means "no algorithm for this configuration": fall back.
  // Anything else is a real error.
  if (status != CUBLAS_STATUS_NOT_SUPPORTED) DDP_CUBLAS_CHECK(status);
  plan->use_simple = true;
  for (int i = 0; i < returned; ++i) {
    if (results[i].state == CUBLAS_STATUS_SUCCESS && results[i].workspaceSize <= workspace_bytes_) {
      plan->algo = results[i].algo;  // best first
      plan->use_simple = false;
      break;
    }
  }
  if (plan->use_simple) {
    // Correct but slow: say so once per plan, so a slow run can be explained.
    std::fprintf(stderr,
                 "ddp: cuBLASLt offers no algorithm for gemm_fp16 %s bias=%d align(a,b,c)=(%d,%d,%d); "
                 "using the CUDA-core fallback kernel\n",
                 describe(g).c_str(), key.has_bias, key.align_a, key.align_b, key.align_c);
  }
  return *plans_.emplace(key, std::move(plan)).first->second;
}

const half16* CublasLtGemm::aligned_bias(const half16* bias, int n, cudaStream_t stream) {
  if (pointer_alignment(bias) >= kBiasAlignment) return bias;
  if (static_cast<size_t>(n) > bias_staging_count_) {
    // The old staging buffer may still be read by queued GEMMs.
    DDP_CUDA_CHECK(cudaStreamSynchronize(stream));
    bias_staging_.reset();
    bias_staging_ = cuda_malloc_unique(static_cast<size_t>(n) * sizeof(half16));
    bias_staging_count_ = static_cast<size_t>(n);
  }
  auto* staged = static_cast<half16*>(bias_staging_.get());
  DDP_CUDA_CHECK(cudaMemcpyAsync(staged, bias, static_cast<size_t>(n) * sizeof(half16), cudaMemcpyDeviceToDevice,
                                 stream));
  return staged;
}

void CublasLtGemm::run(const GemmFp16& g, cudaStream_t stream) {
  validate(g);
  if (g.m == 0 || g.n == 0) return;
  // k == 0 leaves C = beta*C (+ bias), which cuBLASLt does not take.
  if (force_simple_ || g.k == 0) {
    launch_simple_gemm_fp16(g, stream);
    return;
  }
  const half16* bias = g.bias ? aligned_bias(g.bias, g.n, stream) : nullptr;
  const Key key{static_cast<int>(g.trans_a),
                static_cast<int>(g.trans_b),
                g.m,
                g.n,
                g.k,
                g.lda,
                g.ldb,
                g.ldc,
                bias != nullptr,
                g.beta != 0.0f,
                pointer_alignment(g.a),
                pointer_alignment(g.b),
                pointer_alignment(g.c),
                bias ? pointer_alignment(bias) : 0};
  Plan& plan = plan_for(key, g, bias);
  if (plan.use_simple) {
    launch_simple_gemm_fp16(g, stream);
    return;
  }
  // The plan is shared by every call of this key; only the bias address
  // changes between calls (set, not created: no allocation).
  if (bias) set_desc(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, static_cast<const void*>(bias));
  DDP_CUBLAS_CHECK(cublasLtMatmul(handle_, plan.desc, &g.alpha, g.b, plan.lt_a, g.a, plan.lt_b, &g.beta, g.c,
                                  plan.lt_c, g.c, plan.lt_c, &plan.algo, workspace_.get(), workspace_bytes_, stream));
}

}  // namespace ddp
