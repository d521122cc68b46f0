// cuda_gemm.cpp: cuBLASLt plans and calls for GemmLowp (see cuda_gemm.h for
// the row-major <-> column-major mapping and the numerics).
#include "kernels/cuda/cuda_gemm.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <tuple>

#include "kernels/cuda/cuda_check.h"
#include "kernels/error.h"
#include "kernels/gemm_epilogue.h"

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

std::string describe(const GemmLowp& g) {
  return "m=" + std::to_string(g.m) + " n=" + std::to_string(g.n) + " k=" + std::to_string(g.k) +
         " trans_a=" + (g.trans_a == Transpose::Yes ? "T" : "N") +
         " trans_b=" + (g.trans_b == Transpose::Yes ? "T" : "N") + " lda=" + std::to_string(g.lda) +
         " ldb=" + std::to_string(g.ldb) + " ldc=" + std::to_string(g.ldc);
}

void validate(const GemmLowp& g) {
  DDP_REQUIRE(g.m >= 0 && g.n >= 0 && g.k >= 0, "gemm_lowp: negative dimension (" + describe(g) + ")");
  // Row-major stored shapes: A is m x k (k x m when transposed), B is k x n
  // (n x k when transposed), C is m x n; a row stride must cover a row.
  const int a_cols = g.trans_a == Transpose::No ? g.k : g.m;
  const int b_cols = g.trans_b == Transpose::No ? g.n : g.k;
  DDP_REQUIRE(g.lda >= std::max(1, a_cols), "gemm_lowp: lda smaller than a row of stored A (" + describe(g) + ")");
  DDP_REQUIRE(g.ldb >= std::max(1, b_cols), "gemm_lowp: ldb smaller than a row of stored B (" + describe(g) + ")");
  DDP_REQUIRE(g.ldc >= std::max(1, g.n), "gemm_lowp: ldc smaller than a row of C (" + describe(g) + ")");
  validate_gemm_epilogue(g, describe(g));
  if (g.m == 0) return;  // nothing is read or written: pointers may be null
  // The bias gradient of A is asked for even when C is empty (n == 0).
  DDP_REQUIRE(g.k == 0 || (g.n == 0 && !g.bias_grad) || g.a != nullptr, "gemm_lowp: null A");
  if (g.n == 0) return;
  DDP_REQUIRE(g.c != nullptr, "gemm_lowp: null C");
  DDP_REQUIRE(g.k == 0 || g.b != nullptr, "gemm_lowp: null B");
}

const char* epilogue_name(uint32_t epilogue) {
  switch (epilogue) {
    case CUBLASLT_EPILOGUE_DEFAULT:
      return "none";
    case CUBLASLT_EPILOGUE_BIAS:
      return "bias";
    case CUBLASLT_EPILOGUE_RELU:
      return "relu";
    case CUBLASLT_EPILOGUE_RELU_BIAS:
      return "relu+bias";
    case CUBLASLT_EPILOGUE_BGRADB:
      return "bgradb";
    default:
      return "other";
  }
}

template <class T>
void set_desc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const T& value) {
  DDP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(value)));
}

template <class T>
void set_pref(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const T& value) {
  DDP_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof(value)));
}

cublasLtMatrixLayout_t make_layout(cudaDataType_t type, uint64_t rows, uint64_t cols, int64_t ld) {
  cublasLtMatrixLayout_t layout = nullptr;
  DDP_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout, type, rows, cols, ld));
  return layout;
}

void set_batch(cublasLtMatrixLayout_t layout, int batch_count, int64_t stride) {
  const int32_t count = batch_count;
  DDP_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
  DDP_CUBLAS_CHECK(
      cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
}

// The alignment every product of a batch keeps: the base's, and the stride's
// in bytes (the i-th product starts i strides further).
int batch_alignment(const void* base, int64_t stride_elements) {
  const auto stride_bytes = static_cast<uintptr_t>(stride_elements) * sizeof(lowp16);
  return std::min(pointer_alignment(base), pointer_alignment(reinterpret_cast<const void*>(stride_bytes)));
}

}  // namespace

bool CublasLtGemm::Key::operator<(const Key& o) const {
  return std::tie(trans_a, trans_b, m, n, k, lda, ldb, ldc, epilogue, d_fp32, beta_nonzero, align_a, align_b, align_c,
                  align_epilogue, batch_count, stride_a, stride_b, stride_c) <
         std::tie(o.trans_a, o.trans_b, o.m, o.n, o.k, o.lda, o.ldb, o.ldc, o.epilogue, o.d_fp32, o.beta_nonzero,
                  o.align_a, o.align_b, o.align_c, o.align_epilogue, o.batch_count, o.stride_a, o.stride_b, o.stride_c);
}

// Descriptors in cuBLASLt's column-major terms: its A is our B, its B our A.
struct CublasLtGemm::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t lt_a = nullptr;  // our B as stored
  cublasLtMatrixLayout_t lt_b = nullptr;  // our A as stored
  cublasLtMatrixLayout_t lt_c = nullptr;  // our C as stored, also D (in place); or the FP32 scratch
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

CublasLtGemm::CublasLtGemm(size_t workspace_bytes, Precision precision)
    : precision_(precision), workspace_bytes_(workspace_bytes) {
  workspace_ = cuda_malloc_unique(workspace_bytes_);
  DDP_CUBLAS_CHECK(cublasLtCreate(&handle_));
}

CublasLtGemm::~CublasLtGemm() {
  plans_.clear();
  if (handle_) DDP_CUBLAS_CHECK_NOTHROW(cublasLtDestroy(handle_));
}

CublasLtGemm::Key CublasLtGemm::make_key(const GemmLowp& g, uint32_t epilogue, const void* epilogue_vector,
                                         bool d_fp32) const {
  return Key{static_cast<int>(g.trans_a),
             static_cast<int>(g.trans_b),
             g.m,
             g.n,
             g.k,
             g.lda,
             g.ldb,
             d_fp32 ? g.n : g.ldc,
             epilogue,
             d_fp32 ? 1 : 0,
             g.beta != 0.0f,
             pointer_alignment(g.a),
             pointer_alignment(g.b),
             d_fp32 ? kMaxAlignment : pointer_alignment(g.c),
             epilogue_vector ? pointer_alignment(epilogue_vector) : 0};
}

CublasLtGemm::Plan& CublasLtGemm::plan_for(const Key& key, const GemmLowp& g, const void* epilogue_vector) {
  auto found = plans_.find(key);
  if (found != plans_.end()) return *found->second;

  auto plan = std::make_unique<Plan>();
  DDP_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  set_desc(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, static_cast<int32_t>(to_cublas(g.trans_b)));
  set_desc(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, static_cast<int32_t>(to_cublas(g.trans_a)));
  if (key.epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
    set_desc(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, key.epilogue);
    // The vector's type defaults to D's (FP16 or BF16): the bias we pass, or the bias
    // gradient we want. The heuristic reads the pointer's value (not its
    // data) for alignment.
    set_desc(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, epilogue_vector);
  }
  // Column-major views of the row-major storage (rows/cols swapped).
  const bool a_t = g.trans_a == Transpose::Yes, b_t = g.trans_b == Transpose::Yes;
  const cudaDataType_t lowp_type = precision_ == Precision::Bf16 ? CUDA_R_16BF : CUDA_R_16F;
  plan->lt_a = make_layout(lowp_type, b_t ? g.k : g.n, b_t ? g.n : g.k, g.ldb);
  plan->lt_b = make_layout(lowp_type, a_t ? g.m : g.k, a_t ? g.k : g.m, g.lda);
  // FP16 or BF16 inputs with FP32 C/D under CUBLAS_COMPUTE_32F are among
  // cuBLASLt's listed type combinations (the mixed-precision GEMM).
  plan->lt_c = make_layout(key.d_fp32 ? CUDA_R_32F : lowp_type, g.n, g.m, key.ldc);
  if (key.batch_count > 1) {  // cuBLASLt's A is our B, its B our A
    set_batch(plan->lt_a, key.batch_count, key.stride_b);
    set_batch(plan->lt_b, key.batch_count, key.stride_a);
    set_batch(plan->lt_c, key.batch_count, key.stride_c);
  }

  cublasLtMatmulPreference_t pref = nullptr;
  DDP_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  cublasLtMatmulHeuristicResult_t results[kHeuristicResults] = {};
  int returned = 0;
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  try {
    set_pref(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<uint64_t>(workspace_bytes_));
    // NONE (no split-K) always passes the mask; allow only split-K whose
    // partial sums stay FP32 (COMPUTE_TYPE), never 16 bits (INPLACE/OUTPUT_TYPE).
    set_pref(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
             static_cast<uint32_t>(CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE));
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, static_cast<uint32_t>(key.align_b));
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, static_cast<uint32_t>(key.align_a));
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, static_cast<uint32_t>(key.align_c));
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, static_cast<uint32_t>(key.align_c));
    status = cublasLtMatmulAlgoGetHeuristic(handle_, plan->desc, plan->lt_a, plan->lt_b, plan->lt_c, plan->lt_c, pref,
                                            kHeuristicResults, results, &returned);
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
    // Correct but slower: say so once per plan, so a slow run can be explained.
    std::fprintf(
        stderr,
        "ddp: cuBLASLt offers no algorithm for gemm_lowp %s epilogue=%s d=%s align(a,b,c,vector)=(%d,%d,%d,%d); "
        "taking the next route down (cuda_gemm.h)\n",
        describe(g).c_str(), epilogue_name(key.epilogue), key.d_fp32 ? "fp32" : precision_name(precision_), key.align_a,
        key.align_b, key.align_c, key.align_epilogue);
  }
  return *plans_.emplace(key, std::move(plan)).first->second;
}

const lowp16* CublasLtGemm::aligned_bias(const lowp16* bias, int n, cudaStream_t stream) {
  if (pointer_alignment(bias) >= kBiasAlignment) return bias;
  if (static_cast<size_t>(n) > bias_staging_count_) {
    require_buffer_may_grow(capture_state_, "GEMM bias staging", bias_staging_count_ * sizeof(lowp16),
                            static_cast<size_t>(n) * sizeof(lowp16));
    // The old staging buffer may still be read by queued GEMMs.
    DDP_CUDA_CHECK(cudaStreamSynchronize(stream));
    bias_staging_.reset();
    bias_staging_ = cuda_malloc_unique(static_cast<size_t>(n) * sizeof(lowp16));
    bias_staging_count_ = static_cast<size_t>(n);
  }
  auto* staged = static_cast<lowp16*>(bias_staging_.get());
  DDP_CUDA_CHECK(
      cudaMemcpyAsync(staged, bias, static_cast<size_t>(n) * sizeof(lowp16), cudaMemcpyDeviceToDevice, stream));
  return staged;
}

float* CublasLtGemm::accumulator_scratch(size_t count, cudaStream_t stream) {
  if (count > accumulator_count_) {
    require_buffer_may_grow(capture_state_, "GEMM FP32 accumulator scratch", accumulator_count_ * sizeof(float),
                            count * sizeof(float));
    // The old buffer may still be used by queued GEMMs and epilogues.
    DDP_CUDA_CHECK(cudaStreamSynchronize(stream));
    accumulator_fp32_.reset();
    accumulator_count_ = 0;
    accumulator_fp32_ = cuda_malloc_unique(count * sizeof(float));
    accumulator_count_ = count;
  }
  return static_cast<float*>(accumulator_fp32_.get());
}

bool CublasLtGemm::matmul(Plan& plan, const GemmLowp& g, const void* beta, const void* c, void* d,
                          cudaStream_t stream) {
  const cublasStatus_t status =
      cublasLtMatmul(handle_, plan.desc, &g.alpha, g.b, plan.lt_a, g.a, plan.lt_b, beta, c, plan.lt_c, d, plan.lt_c,
                     &plan.algo, workspace_.get(), workspace_bytes_, stream);
  if (status != CUBLAS_STATUS_NOT_SUPPORTED) {
    DDP_CUBLAS_CHECK(status);
    return true;
  }
  plan.use_simple = true;
  std::fprintf(stderr,
               "ddp: cublasLtMatmul refused its own heuristic's algorithm for gemm_lowp %s (NOT_SUPPORTED); "
               "this plan no longer uses cuBLASLt (cuda_gemm.h)\n",
               describe(g).c_str());
  return false;
}

bool CublasLtGemm::try_lt(const GemmLowp& g, uint32_t epilogue, const void* epilogue_vector, cudaStream_t stream) {
  Plan& plan = plan_for(make_key(g, epilogue, epilogue_vector, false), g, epilogue_vector);
  if (plan.use_simple) return false;
  // The plan is shared by every call of this key; only the vector's address
  // changes between calls (set, not created: no allocation).
  if (epilogue != CUBLASLT_EPILOGUE_DEFAULT) set_desc(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, epilogue_vector);
  return matmul(plan, g, &g.beta, g.c, g.c, stream);
}

bool CublasLtGemm::try_fp32_then_epilogue(const GemmLowp& g, cudaStream_t stream) {
  // The plan first: without an algorithm the scratch is not needed, and
  // growing it would cost a stream sync for nothing.
  Plan& plan = plan_for(make_key(g, CUBLASLT_EPILOGUE_DEFAULT, nullptr, true), g, nullptr);
  if (plan.use_simple) return false;
  float* acc = accumulator_scratch(static_cast<size_t>(g.m) * g.n, stream);
  const float zero = 0.0f;  // an activation epilogue has beta == 0 (validate_gemm_epilogue)
  if (!matmul(plan, g, &zero, acc, acc, stream)) return false;
  launch_gemm_epilogue_lowp(precision_, g, acc, stream);
  return true;
}

GemmRoute CublasLtGemm::run_product(const GemmLowp& g, cudaStream_t stream) {
  // k == 0 leaves C = beta*C (+ epilogue), which cuBLASLt does not take.
  if (force_simple_ || g.k == 0) {
    launch_simple_gemm_lowp(precision_, g, stream);
    return GemmRoute::kSimpleGemm;
  }
  if (!has_activation_epilogue(g)) {
    // BGRADB writes (never adds to) the vector, sums A itself (alpha is not
    // documented to apply; we ask only with alpha 1), and cannot add a bias
    // in the same call. A misaligned output takes the kernel: no staging.
    const bool bgradb = g.bias_grad && !g.bias_grad_accumulate && !g.bias && g.alpha == 1.0f && g.beta == 0.0f &&
                        pointer_alignment(g.bias_grad) >= kBiasAlignment;
    if (bgradb && try_lt(g, CUBLASLT_EPILOGUE_BGRADB, g.bias_grad, stream)) return GemmRoute::kLtBgradb;
    const lowp16* bias = g.bias ? aligned_bias(g.bias, g.n, stream) : nullptr;
    if (try_lt(g, bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT, bias, stream))
      return bias ? GemmRoute::kLtBias : GemmRoute::kLt;
  } else {
    if (g.dact == Activation::Relu && !g.pre_activation) {
      const lowp16* bias = g.bias ? aligned_bias(g.bias, g.n, stream) : nullptr;
      if (try_lt(g, bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT, bias, stream)) {
        launch_relu_gradient_in_place_lowp(precision_, g, stream);
        return GemmRoute::kLtThenReluGradientInPlace;
      }
    }
    if (g.act == Activation::Relu && !g.pre_activation) {
      const lowp16* bias = g.bias ? aligned_bias(g.bias, g.n, stream) : nullptr;
      if (try_lt(g, bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU, bias, stream))
        return bias ? GemmRoute::kLtReluBias : GemmRoute::kLtRelu;
    }
    if (try_fp32_then_epilogue(g, stream)) return GemmRoute::kLtFp32ThenEpilogue;
  }
  launch_simple_gemm_lowp(precision_, g, stream);
  return GemmRoute::kSimpleGemm;
}

void CublasLtGemm::run(const GemmLowp& g, cudaStream_t stream) {
  validate(g);
  if (g.m == 0) return;
  bool bias_grad_done = false;
  if (g.n > 0) {
    const GemmRoute route = run_product(g, stream);
    route_counts_.add(route);
    bias_grad_done = route == GemmRoute::kLtBgradb;
  }
  if (g.bias_grad && !bias_grad_done) {
    launch_bias_grad_op_a_lowp(precision_, g, stream);
    route_counts_.add(GemmRoute::kBiasGradKernel);
  }
}

void CublasLtGemm::run_to_fp32(const GemmLowp& g, float* c_fp32, cudaStream_t stream) {
  DDP_REQUIRE(!g.bias && !has_activation_epilogue(g) && !g.bias_grad && g.c == nullptr,
              "gemm_lowp_to_fp32: no epilogue and no 16-bit C (the FP32 result is c_fp32)");
  // validate() reads C's pointer as ours; it is the FP32 one here.
  GemmLowp checked = g;
  checked.c = reinterpret_cast<lowp16*>(c_fp32);
  validate(checked);
  if (g.m == 0 || g.n == 0) return;
  DDP_REQUIRE(g.k > 0 || g.beta == 0.0f || g.beta == 1.0f,
              "gemm_lowp_to_fp32: k == 0 takes beta 0 or 1 only (" + describe(g) + ")");
  if (g.k == 0) {  // C = beta * C: kept, or zeroed
    if (g.beta == 0.0f)
      DDP_CUDA_CHECK(cudaMemset2DAsync(c_fp32, static_cast<size_t>(g.ldc) * sizeof(float), 0,
                                       static_cast<size_t>(g.n) * sizeof(float), static_cast<size_t>(g.m), stream));
    return;
  }
  // d_fp32 with our own stride and alignment: D is c_fp32, not the scratch.
  Key key = make_key(g, CUBLASLT_EPILOGUE_DEFAULT, nullptr, true);
  key.ldc = g.ldc;
  key.align_c = pointer_alignment(c_fp32);
  Plan& plan = plan_for(key, g, nullptr);
  if (plan.use_simple || !matmul(plan, g, &g.beta, c_fp32, c_fp32, stream))
    throw Error("gemm_lowp_to_fp32: cuBLASLt offers no algorithm for " + std::string(precision_name(precision_)) +
                " x " + precision_name(precision_) + " -> FP32 (" + describe(g) + ")");
  route_counts_.add(GemmRoute::kLtToFp32);
}

void CublasLtGemm::run_batched(const GemmLowp& g, int batch_count, int64_t stride_a, int64_t stride_b, int64_t stride_c,
                               cudaStream_t stream) {
  validate(g);
  DDP_REQUIRE(batch_count >= 0, "gemm_batched_lowp: negative batch count");
  DDP_REQUIRE(!g.bias && !has_activation_epilogue(g) && !g.bias_grad,
              "gemm_batched_lowp: no epilogue (bias, activation, bias gradient) in a batched GEMM");
  if (g.m == 0 || g.n == 0 || batch_count == 0) return;
  if (!force_simple_ && g.k > 0) {
    Key key = make_key(g, CUBLASLT_EPILOGUE_DEFAULT, nullptr, false);
    key.batch_count = batch_count;
    key.stride_a = stride_a;
    key.stride_b = stride_b;
    key.stride_c = stride_c;
    key.align_a = batch_alignment(g.a, stride_a);
    key.align_b = batch_alignment(g.b, stride_b);
    key.align_c = batch_alignment(g.c, stride_c);
    Plan& plan = plan_for(key, g, nullptr);
    if (!plan.use_simple && matmul(plan, g, &g.beta, g.c, g.c, stream)) {
      route_counts_.add(GemmRoute::kLtBatched);
      return;
    }
  }
  for (int i = 0; i < batch_count; ++i) {
    GemmLowp gi = g;
    gi.a = g.a + static_cast<int64_t>(i) * stride_a;
    gi.b = g.b + static_cast<int64_t>(i) * stride_b;
    gi.c = g.c + static_cast<int64_t>(i) * stride_c;
    launch_simple_gemm_lowp(precision_, gi, stream);
    route_counts_.add(GemmRoute::kSimpleGemm);
  }
}

}  // namespace ddp
