// softmax_xent_cuda.cu: the CUDA rows of the cross-entropy ops
// (softmax_xent.h).
//
// Cross-entropy works one warp per row (rows are classes wide: tens to
// thousands), FP32 max / sum of exp / log. The forward pass writes per-row
// loss and hit to scratch, then one block adds them in a fixed order: no
// atomics, so the mean is the same bits run to run.
//
// Padded vocabularies (the GPT's 50257 classes in 50304 columns): only the
// first real_cols columns of a row are read for the statistics, and the
// gradient of the others is written as exactly 0. With real_cols == cols
// this is the unpadded loss, operation for operation.
//
// Cost at GPT-2 scale ([8k rows, 50304] 16-bit, 0.8 GB of logits): the
// forward reads each row twice (max, then the sum of exp), the backward three
// times (max, sum, gradient) and writes it once. At 100 KB a row the repeat
// reads come from L2 only while few rows are in flight, so count about six
// passes over memory for the pair, against two or three for a fused
// forward+backward kernel with an online max (llm.c's fused classifier).
// One warp per row keeps the reads coalesced and gives 8k warps, ample
// parallelism. Not yet measured on a GPU; the fused kernel is the next step
// if the profile shows the loss.
#include "kernels/ops/softmax_xent.h"

#include <cmath>

#include "kernels/argmax_math.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_op_context.h"
#include "kernels/error.h"

namespace ddp {
namespace {

constexpr unsigned kFullWarp = 0xffffffffu;
constexpr int kRowsPerBlock = static_cast<int>(kThreadsPerBlock / 32);  // one warp per row

struct RowStats {
  float max;      // max_j x[j]
  int argmax;     // first j attaining it, NaN the largest (torch.argmax), -1 for an empty row
  float sum_exp;  // sum_j exp(x[j] - max)
};

// Called by a whole warp for one row; every lane gets the same result.
template <class C>
__device__ RowStats row_stats(const lowp16* x, int cols, unsigned lane) {
  float best = -INFINITY;
  int best_j = -1;
  // Within a lane j increases: the scan rule keeps the first maximum (or NaN).
  for (int j = static_cast<int>(lane); j < cols; j += 32) {
    const float v = C::widen(x[j]);
    if (best_j < 0 || argmax_scan_takes(v, best)) {
      best = v;
      best_j = j;
    }
  }
  // Across lanes: larger value wins (NaN largest), on a tie the smaller
  // index. The order is total, so both lanes of each butterfly pair agree.
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float other = __shfl_xor_sync(kFullWarp, best, offset);
    const int other_j = __shfl_xor_sync(kFullWarp, best_j, offset);
    if (argmax_merge_takes(other, other_j, best, best_j)) {
      best = other;
      best_j = other_j;
    }
  }
  float sum = 0.0f;
  for (int j = static_cast<int>(lane); j < cols; j += 32) sum += expf(C::widen(x[j]) - best);
  sum = warp_all_sum(sum);
  return {best, best_j, sum};
}

template <class C>
__global__ void xent_rows_kernel(const lowp16* logits, const int32_t* labels, int rows, int cols, int real_cols,
                                 float* row_loss, int32_t* row_correct) {
  const int row = static_cast<int>(blockIdx.x) * kRowsPerBlock + static_cast<int>(threadIdx.x / 32);
  const unsigned lane = threadIdx.x & 31u;
  if (row >= rows) return;  // uniform per warp: the shuffles below stay full-warp
  const lowp16* x = logits + static_cast<size_t>(row) * cols;
  const RowStats s = row_stats<C>(x, real_cols, lane);
  if (lane == 0) {
    const int label = labels[row];
    const bool valid = label >= 0 && label < real_cols;
    // logsumexp(x) - x[label], logsumexp = max + log(sum exp(x - max)).
    row_loss[row] = valid ? (s.max + logf(s.sum_exp)) - C::widen(x[label]) : NAN;
    row_correct[row] = (valid && s.argmax == label) ? 1 : 0;
  }
}

// row_correct may be null (the chunked classifier's mean: no count).
__global__ void xent_finish_kernel(const float* row_loss, const int32_t* row_correct, int rows, float* loss_mean,
                                   int32_t* correct_count) {
  double loss_sum = 0.0;
  int correct = 0;
  for (int r = static_cast<int>(threadIdx.x); r < rows; r += static_cast<int>(blockDim.x)) {
    loss_sum += row_loss[r];
    if (row_correct) correct += row_correct[r];
  }
  loss_sum = block_sum(loss_sum);
  correct = block_sum(correct);
  if (threadIdx.x == 0) {
    *loss_mean = rows > 0 ? static_cast<float>(loss_sum / rows) : 0.0f;  // as CpuBackend
    if (correct_count) *correct_count = correct;
  }
}

// One row's gradient from its statistics, by the whole warp. Same
// operation order as CpuBackend (p = exp * (1/sum), coef * (p - y)), so the
// two differ only by expf's last bits and the sum's order. Each lane reads
// an element before it writes it, and the statistics are complete before
// any write, so dlogits may be the logits (the fused step).
template <class C>
__device__ void write_row_grad(const lowp16* logits, const RowStats& s, int label, int cols, int real_cols, float coef,
                               unsigned lane, lowp16* dlogits) {
  const bool valid = label >= 0 && label < real_cols;
  const float inv_sum = 1.0f / s.sum_exp;
  for (int j = static_cast<int>(lane); j < real_cols; j += 32) {
    const float p = expf(C::widen(logits[j]) - s.max) * inv_sum;
    const float onehot = j == label ? 1.0f : 0.0f;
    dlogits[j] = C::narrow(valid ? coef * (p - onehot) : NAN);
  }
  for (int j = real_cols + static_cast<int>(lane); j < cols; j += 32) dlogits[j] = lowp16{0};
}

// coef = loss_scale / rows, the same float operations as CpuBackend; the
// scale is read here, when the kernel runs (it may live on the device).
template <class C>
__global__ void xent_backward_kernel(const lowp16* logits, const int32_t* labels, int rows, int cols, int real_cols,
                                     ScalarArg loss_scale, lowp16* dlogits) {
  const float coef = loss_scale.get() / static_cast<float>(rows);
  const int row = static_cast<int>(blockIdx.x) * kRowsPerBlock + static_cast<int>(threadIdx.x / 32);
  const unsigned lane = threadIdx.x & 31u;
  if (row >= rows) return;
  const size_t offset = static_cast<size_t>(row) * cols;
  const RowStats s = row_stats<C>(logits + offset, real_cols, lane);
  write_row_grad<C>(logits + offset, s, labels[row], cols, real_cols, coef, lane, dlogits + offset);
}

// The chunked classifier's step: the forward's row loss and the backward's
// gradient (for total_rows rows) from one set of row statistics, the
// gradient over the logits.
template <class C>
__global__ void xent_fused_rows_kernel(lowp16* logits_to_grad, const int32_t* labels, int rows, int cols, int real_cols,
                                       int total_rows, ScalarArg loss_scale, float* row_loss) {
  const float coef = loss_scale.get() / static_cast<float>(total_rows);
  const int row = static_cast<int>(blockIdx.x) * kRowsPerBlock + static_cast<int>(threadIdx.x / 32);
  const unsigned lane = threadIdx.x & 31u;
  if (row >= rows) return;
  lowp16* x = logits_to_grad + static_cast<size_t>(row) * cols;
  const RowStats s = row_stats<C>(x, real_cols, lane);
  const int label = labels[row];
  const bool valid = label >= 0 && label < real_cols;
  if (lane == 0) row_loss[row] = valid ? (s.max + logf(s.sum_exp)) - C::widen(x[label]) : NAN;
  __syncwarp();  // lane 0's read of the label's logit comes before the lanes write the gradient over it
  write_row_grad<C>(x, s, label, cols, real_cols, coef, lane, x);
}

unsigned row_blocks(int rows) { return blocks_for(rows, kRowsPerBlock); }

}  // namespace

void softmax_xent_forward_cuda(CudaOpContext& cuda, const SoftmaxXentForward& op) {
  const int rows = op.rows;
  DDP_REQUIRE(rows >= 0 && (rows == 0 || op.cols > 0), "softmax_xent_forward: needs cols > 0 when rows > 0");
  DDP_REQUIRE(rows == 0 || (op.real_cols > 0 && op.real_cols <= op.cols),
              "softmax_xent_forward: needs 0 < real_cols <= cols");
  // Per-row losses and hits, then one block adds them.
  auto* row_loss = static_cast<float*>(cuda.scratch(static_cast<size_t>(rows) * (sizeof(float) + sizeof(int32_t))));
  auto* row_correct = reinterpret_cast<int32_t*>(row_loss + rows);
  if (rows > 0) {
    with_codec(cuda.precision(), [&](auto codec) {
      using C = decltype(codec);
      launch_kernel<xent_rows_kernel<C>>({row_blocks(rows), kThreadsPerBlock, 0, cuda.stream()}, op.logits, op.labels,
                                         rows, op.cols, op.real_cols, row_loss, row_correct);
    });
    DDP_CUDA_CHECK_LAUNCH();
  }
  // Runs for rows == 0 too: writes loss 0 and count 0.
  launch_kernel<xent_finish_kernel>({1, kFinalReduceThreads, 0, cuda.stream()}, row_loss, row_correct, rows,
                                    op.loss_mean, op.correct_count);
  DDP_CUDA_CHECK_LAUNCH();
}

void softmax_xent_backward_cuda(CudaOpContext& cuda, const SoftmaxXentBackward& op) {
  DDP_REQUIRE(op.rows >= 0 && op.cols >= 0, "softmax_xent_backward: negative shape");
  if (op.rows == 0 || op.cols == 0) return;
  DDP_REQUIRE(op.real_cols > 0 && op.real_cols <= op.cols, "softmax_xent_backward: needs 0 < real_cols <= cols");
  with_codec(cuda.precision(), [&](auto codec) {
    using C = decltype(codec);
    launch_kernel<xent_backward_kernel<C>>({row_blocks(op.rows), kThreadsPerBlock, 0, cuda.stream()}, op.logits,
                                           op.labels, op.rows, op.cols, op.real_cols, op.loss_scale, op.dlogits);
  });
  DDP_CUDA_CHECK_LAUNCH();
}

void softmax_xent_fused_rows_cuda(CudaOpContext& cuda, const SoftmaxXentFusedRows& op) {
  DDP_REQUIRE(op.rows >= 0 && op.cols >= 0 && op.total_rows >= op.rows, "softmax_xent_fused_rows: bad shape");
  if (op.rows == 0) return;
  DDP_REQUIRE(op.real_cols > 0 && op.real_cols <= op.cols, "softmax_xent_fused_rows: needs 0 < real_cols <= cols");
  with_codec(cuda.precision(), [&](auto codec) {
    using C = decltype(codec);
    launch_kernel<xent_fused_rows_kernel<C>>({row_blocks(op.rows), kThreadsPerBlock, 0, cuda.stream()},
                                             op.logits_to_grad, op.labels, op.rows, op.cols, op.real_cols,
                                             op.total_rows, op.loss_scale, op.row_loss);
  });
  DDP_CUDA_CHECK_LAUNCH();
}

void loss_rows_mean_cuda(CudaOpContext& cuda, const LossRowsMean& op) {
  DDP_REQUIRE(op.rows >= 0, "loss_rows_mean: negative rows");
  launch_kernel<xent_finish_kernel>({1, kFinalReduceThreads, 0, cuda.stream()}, op.row_loss, nullptr, op.rows,
                                    op.loss_mean, nullptr);
  DDP_CUDA_CHECK_LAUNCH();
}

}  // namespace ddp
