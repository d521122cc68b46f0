// rmsnorm.h: RMSNorm over the rows of a [rows, cols] 16-bit matrix (Llama's
// LlamaRMSNorm), forward and backward. FP32 arithmetic inside; every
// reduction in an order fixed by the shapes (no atomics), so each row gives
// the same bits run to run. The per-element math is below (DDP_HD), shared
// by both rows.
//
// Forward, per row r, in FP32:
//   ms      = (sum_c x[r, c]^2) / cols      (an FP32 sum in a fixed order:
//                                            CPU sequential, CUDA lane-strided
//                                            then a warp butterfly)
//   rstd[r] = 1 / sqrt(ms + eps)
//   h[r, c] = lowp(x[r, c] * rstd[r])                  rounding 1
//   y[r, c] = lowp(float(weight[c]) * float(h[r, c]))  rounding 2
// Two roundings, at Hugging Face's LlamaRMSNorm points
// (`self.weight * hidden_states.to(input_dtype)`: the normalised row is cast
// back to the input's 16-bit type before the weight multiplies it), so a
// Llama built on this op can match transformers bit for bit where the FP32
// statistics agree. (The product weight * h of two 16-bit values is exact
// in FP32, barring BF16 products past FP32's range or below its smallest
// subnormal: the second rounding is the only one after the first.)
//
// Backward. With xhat = x * rstd (FP32) and g = float(weight) * dy:
//   y_c = w_c xhat_c,  xhat_c = x_c r,  r = (ms + eps)^(-1/2),
//   ms = (1/n) sum_k x_k^2,  so  d r / d x_k = -r^3 x_k / n  and
//   d xhat_c / d x_k = delta_ck r - x_c x_k r^3 / n;
//   dL/dx_k = sum_c g_c d xhat_c / d x_k = r g_k - (r^3 x_k / n) sum_c g_c x_c
//           = r (g_k - xhat_k mean_c(g xhat)).
//   dL/dw_c = sum_r dy_rc xhat_rc.
// That is the exact gradient of the FP32 math with the h rounding treated as
// identity (as LayerNorm's is of its own rounding); the weight gradient
// sums dy against the h the forward actually multiplied by the weight
// (recomputed as lowp(xhat)), so dweight is exact for the rounded forward:
//   dx[r, c]     = lowp(rstd * (g - xhat * mean_c(g * xhat))
//                       [+ float(dx[r, c]) when accumulate_dx])  one rounding
//   dweight[c]   = lowp(sum_r dy[r, c] * float(h[r, c])
//                       [+ float(dweight[c]) when accumulate_weight])
// mean_c(g * xhat) an FP32 row sum (as the forward's), divided by cols; the
// dweight column sums in FP32 in an order fixed by rows (CPU: rows in
// increasing order, one column per thread; CUDA: chunks of
// kRmsNormRowsPerChunk rows in order, then the chunks in order), so the two
// rows agree to FP32's summation tolerance.
//
// Shapes and memory: cols > 0 (else ddp::Error naming the op), rows >= 0;
// rows == 0 reads nothing and writes dweight = 0 unless accumulate_weight
// (an empty sum, as LayerNorm's dgamma). No output may overlap an input or another
// output: y != x, dx != dy, dx != x (the backward reads x and dy for
// dweight and dx alike). rstd is the forward's, passed back unchanged.
#pragma once

#include <cmath>

#include "kernels/host_device.h"
#include "kernels/lowp16.h"
#include "kernels/lowp_codec.h"
#include "kernels/ops/op_dispatch.h"

namespace ddp {

// Llama's RMSNorm epsilon (LlamaRMSNorm's rms_norm_eps default).
constexpr float kRmsNormEps = 1e-6f;
// Rows per partial sum of dweight in the CUDA row (see the contract above).
constexpr int kRmsNormRowsPerChunk = 64;

// ---- the per-element math, shared by the CPU and CUDA rows -------------------
// rstd from the row's mean square: 1 / sqrt(ms + eps).
DDP_HD float rmsnorm_rstd(float mean_square, float eps) { return 1.0f / sqrtf(mean_square + eps); }
// xhat = x * rstd (FP32), the normalised input before rounding.
DDP_HD float rmsnorm_xhat(float x, float rstd) { return x * rstd; }
// h = lowp(xhat): rounding 1 (the `.to(input_dtype)`).
template <class C>
DDP_HD lowp16 rmsnorm_hidden(float x, float rstd) {
  return C::narrow(rmsnorm_xhat(x, rstd));
}
// y = lowp(weight * h): rounding 2.
template <class C>
DDP_HD lowp16 rmsnorm_output(float weight, lowp16 hidden) {
  return C::narrow(weight * C::widen(hidden));
}
// dx before its rounding: rstd * (g - xhat * mean_gx), g = weight * dy,
// mean_gx = mean_c(g * xhat) over the row.
DDP_HD float rmsnorm_dx(float g, float xhat, float mean_gx, float rstd) { return rstd * (g - xhat * mean_gx); }

// ---- the ops -----------------------------------------------------------------
struct RmsNormForward {
  static constexpr const char* kName = "rmsnorm_forward_lowp";
  const lowp16* x = nullptr;       // [rows, cols]
  const lowp16* weight = nullptr;  // [cols]
  int rows = 0;                    // >= 0
  int cols = 0;                    // > 0
  float eps = kRmsNormEps;
  lowp16* y = nullptr;    // [rows, cols], not x
  float* rstd = nullptr;  // [rows], kept for the backward
};
void rmsnorm_forward_lowp_cpu(CpuBackend& cpu, const RmsNormForward& op);
void rmsnorm_forward_lowp_cuda(CudaOpContext& cuda, const RmsNormForward& op);
inline void rmsnorm_forward_lowp(Backend& backend, const RmsNormForward& op) {
  run_op(backend, op, rmsnorm_forward_lowp_cpu, DDP_CUDA_ROW(rmsnorm_forward_lowp_cuda));
}

struct RmsNormBackward {
  static constexpr const char* kName = "rmsnorm_backward_lowp";
  const lowp16* dy = nullptr;      // [rows, cols]
  const lowp16* x = nullptr;       // [rows, cols]
  const lowp16* weight = nullptr;  // [cols]
  const float* rstd = nullptr;     // [rows], the forward's
  int rows = 0;                    // >= 0
  int cols = 0;                    // > 0
  lowp16* dx = nullptr;            // [rows, cols], neither dy nor x
  bool accumulate_dx = false;      // dx += (the residual stream's gradient already there)
  lowp16* dweight = nullptr;       // [cols]
  bool accumulate_weight = false;  // dweight += (gradient accumulation over micro-batches)
};
void rmsnorm_backward_lowp_cpu(CpuBackend& cpu, const RmsNormBackward& op);
void rmsnorm_backward_lowp_cuda(CudaOpContext& cuda, const RmsNormBackward& op);
inline void rmsnorm_backward_lowp(Backend& backend, const RmsNormBackward& op) {
  run_op(backend, op, rmsnorm_backward_lowp_cpu, DDP_CUDA_ROW(rmsnorm_backward_lowp_cuda));
}

}  // namespace ddp
