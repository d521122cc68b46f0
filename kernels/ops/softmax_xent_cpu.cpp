// softmax_xent_cpu.cpp: the CPU rows of the cross-entropy ops
// (softmax_xent.h). A row is widened to FP32 once; its exponentials
// (cpu_softmax_rows.h) serve the loss and the gradient alike, so the fused
// step and the unfused calls compute each row with the same operations in
// the same order. Rows are split over CpuBackend's threads; the mean sums
// the row losses in row order on one thread, so the bits never depend on
// the split.
#include "kernels/ops/softmax_xent.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/argmax_math.h"

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_softmax_rows.h"
#include "kernels/error.h"
#include "kernels/cpu/cpu_elementwise.h"  // widen_lowp, narrow_fp32
#include "kernels/half_convert.h"

namespace ddp {

namespace {

// Per-row results of softmax_xent_forward before they are summed, kept by
// the backend between calls.
struct XentScratch {
  std::vector<float> row_loss;
  std::vector<int32_t> row_correct;
};

void check_shape(int rows, int cols, int real_cols, const char* op) {
  DDP_REQUIRE(rows >= 0 && (rows == 0 || (real_cols > 0 && real_cols <= cols)),
              std::string(op) + ": needs 0 < real_cols <= cols");
}

// A row's statistics over its classes; `v` (real floats) receives the
// widened logits and leaves holding exp(logit - max).
struct RowExp {
  float max = 0.0f;
  int argmax = 0;     // the first maximum, NaN the largest (torch.argmax)
  float label_logit;  // 0 when the label is not a class
  float sum_exp = 0.0f;
  bool valid = false;
};

RowExp row_exp(Precision p, const lowp16* logits, size_t real, int32_t label, float* v) {
  cpu::widen_lowp(p, logits, v, real);
  RowExp s;
  s.max = v[0];
  for (size_t c = 1; c < real; ++c)
    if (argmax_scan_takes(v[c], s.max)) {  // the first maximum wins, NaN the largest (argmax_math.h)
      s.max = v[c];
      s.argmax = static_cast<int>(c);
    }
  s.valid = label >= 0 && static_cast<size_t>(label) < real;
  s.label_logit = s.valid ? v[label] : 0.0f;
  s.sum_exp = cpu::exp_shifted_sum(v, s.max, v, real);  // in place: the logits are spent
  return s;
}

float row_loss_of(const RowExp& s) {
  return s.valid ? s.max + logf(s.sum_exp) - s.label_logit : std::numeric_limits<float>::quiet_NaN();
}

// drow [width] = lowp(coef * (softmax - onehot)) over the classes, 0 in the
// padded columns; `v` holds the row's exponentials and is spent.
void write_row_grad(Precision p, const RowExp& s, int32_t label, float coef, size_t real, size_t width, float* v,
                    lowp16* drow) {
  const float inv_sum = 1.0f / s.sum_exp;
  for (size_t c = 0; c < real; ++c) {
    const float prob = v[c] * inv_sum;
    v[c] = s.valid ? coef * (prob - (static_cast<int32_t>(c) == label ? 1.0f : 0.0f))
                   : std::numeric_limits<float>::quiet_NaN();
  }
  cpu::narrow_fp32(p, v, drow, real);
  std::fill(drow + real, drow + width, lowp16{0});  // padded classes: no probability, no gradient
}

// fn(r, v) for each row, v a per-piece FP32 row of `real` floats.
template <class Fn>
void each_row(CpuThreadPool& pool, int rows, int cols, int real_cols, Fn&& fn) {
  const size_t real = count_of(real_cols);
  pool.parallel_for(count_of(rows), 1, cpu_pass_pieces(count_of(rows) * count_of(cols), pool.size()),
                    [&](size_t r0, size_t r1) {
                      std::vector<float> v(real);
                      for (size_t r = r0; r < r1; ++r) fn(r, v.data());
                    });
}

float rows_mean(const float* row_loss, int rows) {
  float loss_sum = 0.0f;
  for (size_t r = 0; r < count_of(rows); ++r) loss_sum += row_loss[r];
  return rows > 0 ? loss_sum / static_cast<float>(rows) : 0.0f;
}

}  // namespace

void softmax_xent_forward_cpu(CpuBackend& cpu, const SoftmaxXentForward& op) {
  const Precision p = cpu.precision();
  const int rows = op.rows, cols = op.cols, real_cols = op.real_cols;
  const lowp16* logits = op.logits;
  const int32_t* labels = op.labels;
  check_shape(rows, cols, real_cols, op.kName);
  XentScratch& s = cpu.row_scratch<XentScratch>();
  s.row_loss.resize(count_of(rows));
  s.row_correct.resize(count_of(rows));
  const size_t width = count_of(cols);
  each_row(cpu.pool(), rows, cols, real_cols, [&](size_t r, float* v) {
    const RowExp e = row_exp(p, logits + r * width, count_of(real_cols), labels[r], v);
    s.row_loss[r] = row_loss_of(e);
    s.row_correct[r] = e.valid && e.argmax == labels[r];
  });
  *op.loss_mean = rows_mean(s.row_loss.data(), rows);
  if (op.correct_count) {
    int32_t correct = 0;
    for (const int32_t hit : s.row_correct) correct += hit;
    *op.correct_count = correct;
  }
}

void softmax_xent_backward_cpu(CpuBackend& cpu, const SoftmaxXentBackward& op) {
  const Precision p = cpu.precision();
  check_shape(op.rows, op.cols, op.real_cols, op.kName);
  const float coef = op.loss_scale.get() / static_cast<float>(op.rows);
  const size_t width = count_of(op.cols), real = count_of(op.real_cols);
  each_row(cpu.pool(), op.rows, op.cols, op.real_cols, [&](size_t r, float* v) {
    const RowExp e = row_exp(p, op.logits + r * width, real, op.labels[r], v);
    write_row_grad(p, e, op.labels[r], coef, real, width, v, op.dlogits + r * width);
  });
}

void softmax_xent_fused_rows_cpu(CpuBackend& cpu, const SoftmaxXentFusedRows& op) {
  const Precision p = cpu.precision();
  check_shape(op.rows, op.cols, op.real_cols, op.kName);
  DDP_REQUIRE(op.total_rows >= op.rows, "softmax_xent_fused_rows: a chunk larger than its batch");
  const float coef = op.loss_scale.get() / static_cast<float>(op.total_rows);
  const size_t width = count_of(op.cols), real = count_of(op.real_cols);
  each_row(cpu.pool(), op.rows, op.cols, op.real_cols, [&](size_t r, float* v) {
    lowp16* row = op.logits_to_grad + r * width;
    const RowExp e = row_exp(p, row, real, op.labels[r], v);  // the row is in v now: it may be overwritten
    op.row_loss[r] = row_loss_of(e);
    write_row_grad(p, e, op.labels[r], coef, real, width, v, row);
  });
}

void loss_rows_mean_cpu(CpuBackend& /*cpu*/, const LossRowsMean& op) {
  DDP_REQUIRE(op.rows >= 0, "loss_rows_mean: negative rows");
  *op.loss_mean = rows_mean(op.row_loss, op.rows);
}

}  // namespace ddp
