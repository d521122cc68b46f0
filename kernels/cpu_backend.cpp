// cpu_backend.cpp: reference implementation of the Backend interface.
// Element-wise math comes from elementwise_math.h (shared with CUDA); GEMM is
// FP16 -> FP32 widening + cblas_sgemm + one RNE rounding to FP16.
#include "kernels/cpu_backend.h"

#include <cblas.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

#include "kernels/error.h"
#include "kernels/half_convert.h"

#if defined(DDP_HAVE_OPENBLAS)
extern "C" {
void openblas_set_num_threads(int);
int openblas_get_num_threads(void);
}
#endif

namespace ddp {

int set_blas_threads(int threads) {
#if defined(DDP_HAVE_OPENBLAS)
  if (threads > 0) openblas_set_num_threads(threads);
  return openblas_get_num_threads();
#else
  (void)threads;
  return 1;
#endif
}

CpuBackend::CpuBackend(int threads) { threads_ = set_blas_threads(threads); }

std::string CpuBackend::description() const {
#if defined(DDP_HAVE_OPENBLAS)
  const char* blas = "OpenBLAS";
#else
  const char* blas = "CBLAS";
#endif
  return std::string("CPU (") + blas + ", " + std::to_string(threads_) + " thread" + (threads_ == 1 ? "" : "s") +
         (f16c_available() ? ", F16C" : "") + ")";
}

// ---- memory ---------------------------------------------------------------------
void* CpuBackend::allocate_bytes(size_t size_bytes) {
  // 64-byte alignment: full cache lines and aligned SIMD loads in BLAS.
  void* p = std::aligned_alloc(64, (size_bytes + 63) / 64 * 64);
  if (!p) throw Error("CpuBackend: out of host memory allocating " + std::to_string(size_bytes) + " bytes");
  return p;
}
void CpuBackend::free_bytes(void* ptr) noexcept { std::free(ptr); }
void CpuBackend::copy_to_device(void* dst, const void* src, size_t n) { std::memcpy(dst, src, n); }
void CpuBackend::copy_to_host(void* dst, const void* src, size_t n) { std::memcpy(dst, src, n); }
void CpuBackend::copy_on_device(void* dst, const void* src, size_t n) { std::memmove(dst, src, n); }
void CpuBackend::fill_zero(void* dst, size_t n) { std::memset(dst, 0, n); }

// ---- GEMM -----------------------------------------------------------------------
namespace {
// Widen a stored rows x cols FP16 matrix with row stride ld into a dense FP32
// copy (stride cols), so sgemm sees exactly the FP16 values.
void widen_matrix(const half16* src, int rows, int cols, int ld, std::vector<float>& dst) {
  dst.resize(static_cast<size_t>(rows) * cols);
  for (int r = 0; r < rows; ++r)
    half_to_float_array(src + static_cast<size_t>(r) * ld, dst.data() + static_cast<size_t>(r) * cols, cols);
}
}  // namespace

void CpuBackend::gemm_fp16(const GemmFp16& g) {
  DDP_REQUIRE(g.m >= 0 && g.n >= 0 && g.k >= 0, "gemm_fp16: negative dimension");
  DDP_REQUIRE(!(g.bias && g.beta != 0.0f), "gemm_fp16: bias epilogue requires beta == 0");
  if (g.m == 0 || g.n == 0) return;
  const bool ta = g.trans_a == Transpose::Yes, tb = g.trans_b == Transpose::Yes;
  const int a_rows = ta ? g.k : g.m, a_cols = ta ? g.m : g.k;
  const int b_rows = tb ? g.n : g.k, b_cols = tb ? g.k : g.n;
  widen_matrix(g.a, a_rows, a_cols, g.lda, a_fp32_);
  widen_matrix(g.b, b_rows, b_cols, g.ldb, b_fp32_);
  if (g.beta != 0.0f) {
    widen_matrix(g.c, g.m, g.n, g.ldc, c_fp32_);
  } else {
    c_fp32_.assign(static_cast<size_t>(g.m) * g.n, 0.0f);
  }
  if (g.k > 0) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, g.m, g.n, g.k,
                g.alpha, a_fp32_.data(), std::max(a_cols, 1), b_fp32_.data(), std::max(b_cols, 1), g.beta,
                c_fp32_.data(), g.n);
  } else {
    for (float& c : c_fp32_) c *= g.beta;
  }
  if (g.bias) {
    b_fp32_.resize(g.n);  // reuse scratch for the widened bias
    half_to_float_array(g.bias, b_fp32_.data(), g.n);
    for (int r = 0; r < g.m; ++r)
      for (int c = 0; c < g.n; ++c) c_fp32_[static_cast<size_t>(r) * g.n + c] += b_fp32_[c];
  }
  for (int r = 0; r < g.m; ++r)
    float_to_half_array(c_fp32_.data() + static_cast<size_t>(r) * g.n, g.c + static_cast<size_t>(r) * g.ldc, g.n);
}

// ---- element-wise -----------------------------------------------------------------
void CpuBackend::add_bias_fp16(half16* y, const half16* bias, int rows, int cols) {
  for (int r = 0; r < rows; ++r) {
    half16* row = y + static_cast<size_t>(r) * cols;
    for (int c = 0; c < cols; ++c) row[c] = to_half(to_float(row[c]) + to_float(bias[c]));
  }
}

void CpuBackend::activation_forward_fp16(Activation act, const half16* z, half16* y, size_t count) {
  for (size_t i = 0; i < count; ++i) y[i] = to_half(activation_forward(act, to_float(z[i])));
}

void CpuBackend::activation_backward_fp16(Activation act, const half16* z, const half16* dy, half16* dz,
                                          size_t count) {
  for (size_t i = 0; i < count; ++i) dz[i] = to_half(activation_backward(act, to_float(z[i]), to_float(dy[i])));
}

void CpuBackend::bias_grad_fp16(const half16* dy, int rows, int cols, half16* db, bool accumulate) {
  c_fp32_.assign(cols, 0.0f);
  for (int r = 0; r < rows; ++r) {
    const half16* row = dy + static_cast<size_t>(r) * cols;
    for (int c = 0; c < cols; ++c) c_fp32_[c] += to_float(row[c]);
  }
  for (int c = 0; c < cols; ++c) db[c] = to_half(c_fp32_[c] + (accumulate ? to_float(db[c]) : 0.0f));
}

void CpuBackend::cast_fp32_to_fp16(const float* src, half16* dst, size_t count) {
  float_to_half_array(src, dst, count);
}
void CpuBackend::cast_fp16_to_fp32(const half16* src, float* dst, size_t count) {
  half_to_float_array(src, dst, count);
}

// ---- losses -------------------------------------------------------------------------
void CpuBackend::softmax_xent_forward(const half16* logits, const int32_t* labels, int rows, int cols,
                                      float* loss_mean, int32_t* correct_count) {
  float loss_sum = 0.0f;
  int32_t correct = 0;
  for (int r = 0; r < rows; ++r) {
    const half16* row = logits + static_cast<size_t>(r) * cols;
    float max_v = to_float(row[0]);
    int argmax = 0;
    for (int c = 1; c < cols; ++c) {
      const float v = to_float(row[c]);
      if (v > max_v) max_v = v, argmax = c;
    }
    float sum_exp = 0.0f;
    for (int c = 0; c < cols; ++c) sum_exp += expf(to_float(row[c]) - max_v);
    loss_sum += max_v + logf(sum_exp) - to_float(row[labels[r]]);
    correct += (argmax == labels[r]);
  }
  *loss_mean = rows > 0 ? loss_sum / static_cast<float>(rows) : 0.0f;
  if (correct_count) *correct_count = correct;
}

void CpuBackend::softmax_xent_backward(const half16* logits, const int32_t* labels, int rows, int cols,
                                       float loss_scale, half16* dlogits) {
  const float coef = loss_scale / static_cast<float>(rows);
  for (int r = 0; r < rows; ++r) {
    const half16* row = logits + static_cast<size_t>(r) * cols;
    half16* drow = dlogits + static_cast<size_t>(r) * cols;
    float max_v = to_float(row[0]);
    for (int c = 1; c < cols; ++c) max_v = std::max(max_v, to_float(row[c]));
    float sum_exp = 0.0f;
    for (int c = 0; c < cols; ++c) sum_exp += expf(to_float(row[c]) - max_v);
    const float inv_sum = 1.0f / sum_exp;
    for (int c = 0; c < cols; ++c) {
      const float p = expf(to_float(row[c]) - max_v) * inv_sum;
      drow[c] = to_half(coef * (p - (c == labels[r] ? 1.0f : 0.0f)));
    }
  }
}

void CpuBackend::mse_forward(const half16* pred, const float* target, int rows, int cols, float* loss_mean) {
  const size_t n = static_cast<size_t>(rows) * cols;
  float sum = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    const float d = to_float(pred[i]) - target[i];
    sum += d * d;
  }
  *loss_mean = n ? sum / static_cast<float>(n) : 0.0f;
}

void CpuBackend::mse_backward(const half16* pred, const float* target, int rows, int cols, float loss_scale,
                              half16* dpred) {
  const size_t n = static_cast<size_t>(rows) * cols;
  const float coef = 2.0f * loss_scale / static_cast<float>(n);
  for (size_t i = 0; i < n; ++i) dpred[i] = to_half(coef * (to_float(pred[i]) - target[i]));
}

// ---- optimizer ---------------------------------------------------------------------
void CpuBackend::unscale_fp16_to_fp32(const half16* grads_fp16, float* grads_fp32, size_t count, float inv_scale,
                                      int32_t* nonfinite_flag) {
  half_to_float_array(grads_fp16, grads_fp32, count);
  bool bad = false;
  for (size_t i = 0; i < count; ++i) {
    grads_fp32[i] *= inv_scale;
    bad |= !is_finite_float(grads_fp32[i]);
  }
  if (bad) *nonfinite_flag = 1;
}

void CpuBackend::l2_norm_fp32(const float* x, size_t count, float* norm) {
  // Double accumulation: the reference must be at least as accurate as the
  // CUDA tree reduction it is compared with.
  double sum = 0.0;
  for (size_t i = 0; i < count; ++i) sum += static_cast<double>(x[i]) * x[i];
  *norm = static_cast<float>(std::sqrt(sum));
}

void CpuBackend::sgd_update(const SgdParams& params, const float* grads_fp32, float* master_fp32,
                            float* momentum_fp32, half16* weights_fp16, size_t count, const int32_t* skip_flag) {
  if (skip_flag && *skip_flag) return;
  for (size_t i = 0; i < count; ++i) {
    float dummy = 0.0f;
    sgd_update_element(params, grads_fp32[i], master_fp32[i], momentum_fp32 ? momentum_fp32[i] : dummy);
  }
  float_to_half_array(master_fp32, weights_fp16, count);
}

}  // namespace ddp
