// tied_classifier.cpp
#include "trainer/models/layers/tied_classifier.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/error.h"
#include "kernels/ops/elementwise.h"
#include "kernels/ops/softmax_xent.h"
#include "trainer/models/layers/gemm_calls.h"

namespace ddp {
namespace {

// No chunk's GEMM is under 2^20 multiply-adds: OpenBLAS (0.3.21 on AVX-512)
// runs products under 10^6 through its small-matrix kernels, which sum in
// another order than its blocked ones, so a smaller chunk of a large GEMM
// would not give the whole GEMM's bits.
constexpr double kMinChunkMacs = 1 << 20;
// The CPU GEMM's row-slice grain and the rows below which it may cut a
// product by columns instead (cpu_gemm.cpp: kSliceGrain, kColumnSplitRows):
// pieces start at multiples of the one and hold at least the other, so each
// is cut as the whole product is, by rows, in step with it.
constexpr int kPieceGrain = 48;
constexpr int kMinPieceRows = 96;

// How `total` rows are cut: pieces of `size` rounded up to kPieceGrain,
// none under `floor` rows (kMinPieceRows, kMinChunkMacs: a short last piece
// joins the one before it).
struct Pieces {
  int total = 0;
  int size = 0;
  int floor = 0;
  int at(int first) const {
    const int left = total - first;
    return left - size < floor ? left : size;
  }
  int largest() const {
    int most = 0;
    for (int first = 0; first < total; first += at(first)) most = std::max(most, at(first));
    return most;
  }
};

Pieces make_pieces(int total, int size, double macs_per_row) {
  Pieces p;
  p.total = total;
  p.floor = std::min(total, std::max(kMinPieceRows, static_cast<int>(std::ceil(kMinChunkMacs / macs_per_row))));
  p.size = std::min(total, (std::max(size, p.floor) + kPieceGrain - 1) / kPieceGrain * kPieceGrain);
  return p;
}

// The logits and dx GEMMs, by rows: each row costs V x C multiply-adds.
Pieces row_pieces(int rows, int chunk_rows, int vocab, int channels) {
  return make_pieces(rows, chunk_rows, static_cast<double>(vocab) * channels);
}

// d_wte's GEMM sums over all rows, so it is cut by vocabulary rows (each
// costs R x C): as many pieces as the rows have chunks, so a piece widens
// about chunk_rows x V values.
Pieces vocab_pieces(int vocab, int rows, int chunk_rows, int channels) {
  const int chunks = (rows + chunk_rows - 1) / chunk_rows;
  return make_pieces(vocab, (vocab + chunks - 1) / chunks, static_cast<double>(rows) * channels);
}

}  // namespace

int classifier_chunk_capacity(size_t max_rows, int vocab, int channels, int chunk_rows) {
  DDP_REQUIRE(chunk_rows > 0, "classifier_chunk_capacity: the head is not chunked");
  // A batch of t <= max_rows rows is cut into pieces of at most `size`, the
  // last up to size + floor - 1 (Pieces::at), both largest at t = max_rows
  // before they are clamped to t.
  const int r = static_cast<int>(max_rows);
  const Pieces p = make_pieces(std::numeric_limits<int>::max(), chunk_rows, static_cast<double>(vocab) * channels);
  return std::min(r, p.size + p.floor - 1);
}

ClassifierBytes classifier_bytes(size_t rows, int vocab, int channels, int chunk_rows, bool widens_fp32,
                                 ClassifierLogits logits) {
  const double rv = static_cast<double>(rows) * vocab;
  ClassifierBytes b;
  if (logits == ClassifierLogits::Drop) {
    DDP_REQUIRE(chunk_rows > 0, "classifier_bytes: --classifier-logits drop needs --classifier-chunk");
    const double capacity = classifier_chunk_capacity(rows, vocab, channels, chunk_rows);
    const double chunk =
        static_cast<double>(row_pieces(static_cast<int>(rows), chunk_rows, vocab, channels).largest()) * vocab;
    b.lowp_buffers = 2 * capacity * vocab + 2 * static_cast<double>(rows) * channels;
    b.row_losses = 4.0 * static_cast<double>(rows);
    b.fp32_sums = 4.0 * vocab * channels;
    // A chunk's FP32 logits; its gradient widened as the A of dx's and
    // d_wte's GEMMs (d_wte's result is the FP32 sum itself: no scratch).
    if (widens_fp32) b.fp32_widening = 4 * chunk + 4 * chunk;
    return b;
  }
  if (chunk_rows <= 0) {
    b.lowp_buffers = 2 * 2 * rv;
    // The logits GEMM's FP32 result, and dlogits widened as the A operand
    // of both backward GEMMs (one scratch, reused).
    if (widens_fp32) b.fp32_widening = 2 * 4 * rv;
    return b;
  }
  const int r = static_cast<int>(rows);
  const double chunk = static_cast<double>(row_pieces(r, chunk_rows, vocab, channels).largest()) * vocab;
  const double piece = static_cast<double>(rows) * vocab_pieces(vocab, r, chunk_rows, channels).largest();
  b.lowp_buffers = 2 * rv;
  // A chunk's FP32 logits; the widened A of a dx chunk or of a d_wte piece.
  if (widens_fp32) b.fp32_widening = 4 * chunk + 4 * std::max(chunk, piece);
  b.row_losses = 4.0 * static_cast<double>(rows);
  return b;
}

TiedClassifier::TiedClassifier(Backend& backend, int channels, int vocab, int real_vocab, size_t max_rows,
                               int chunk_rows, ClassifierLogits logits)
    : backend_(backend),
      channels_(channels),
      vocab_(vocab),
      real_vocab_(real_vocab),
      chunk_rows_(chunk_rows),
      logits_kept_(logits),
      max_rows_(max_rows) {
  DDP_REQUIRE(chunk_rows >= 0, "TiedClassifier: negative chunk");
  DDP_REQUIRE(!drops_logits() || chunked(), "--classifier-logits drop needs --classifier-chunk ROWS");
  const size_t v = static_cast<size_t>(vocab);
  if (drops_logits()) {
    logits_ = Buffer<lowp16>(backend,
                             static_cast<size_t>(classifier_chunk_capacity(max_rows, vocab, channels, chunk_rows)) * v);
    dx_ = Buffer<lowp16>(backend, max_rows * channels);
    d_wte_sum_fp32_ = Buffer<float>(backend, v * channels);
  } else {
    logits_ = Buffer<lowp16>(backend, max_rows * v);
  }
  if (chunked())
    row_loss_ = Buffer<float>(backend, max_rows);
  else
    output_grad_ = Buffer<lowp16>(backend, max_rows * v);
}

lowp16* TiedClassifier::output_grad() {
  if (drops_logits())
    throw Error("TiedClassifier: --classifier-logits drop keeps no logits gradient (training calls forward_with_loss)");
  return chunked() ? logits_.data() : output_grad_.data();
}

ModelOutput TiedClassifier::forward(const lowp16* x, int rows, const WeightTable& weights_lowp) {
  const int c = channels_;
  lowp16* logits = logits_.data();
  if (drops_logits()) {
    if (full_logits_.count() == 0) full_logits_ = Buffer<lowp16>(backend_, max_rows_ * vocab_);
    logits = full_logits_.data();
  }
  const Pieces chunks = row_pieces(rows, chunked() ? chunk_rows_ : rows, vocab_, c);
  for (int r0 = 0, n = 0; r0 < rows; r0 += n) {
    n = chunks.at(r0);
    const size_t at = static_cast<size_t>(r0);
    // logits [n, V] = x [n, C] wte [V, C]^T
    gemm_lowp(backend_, gemm_nt(n, vocab_, c, x + at * c, c, weights_lowp.at(wte_), c, logits + at * vocab_, vocab_));
  }
  ModelOutput out{logits, rows, vocab_};
  out.classes = real_vocab_;
  return out;
}

void TiedClassifier::forward_rows(const lowp16* x, int rows, const WeightTable& weights_lowp,
                                  const std::function<void(const ModelOutput& part, int first_row)>& each) {
  if (!drops_logits()) {
    each(forward(x, rows, weights_lowp), 0);
    return;
  }
  const int c = channels_;
  const Pieces chunks = row_pieces(rows, chunk_rows_, vocab_, c);
  for (int r0 = 0, n = 0; r0 < rows; r0 += n) {
    n = chunks.at(r0);
    gemm_lowp(backend_, gemm_nt(n, vocab_, c, x + static_cast<size_t>(r0) * c, c, weights_lowp.at(wte_), c,
                                logits_.data(), vocab_));
    ModelOutput part{logits_.data(), n, vocab_};
    part.classes = real_vocab_;
    each(part, r0);
  }
}

void TiedClassifier::forward_with_loss(const lowp16* x, int rows, const WeightTable& weights_lowp,
                                       const int32_t* labels, ScalarArg scale, float* loss_mean) {
  DDP_REQUIRE(chunked(), "TiedClassifier::forward_with_loss: the unchunked head leaves the loss to loss_head.h");
  const int c = channels_;
  const Pieces chunks = row_pieces(rows, chunk_rows_, vocab_, c);
  const lowp16* wte = weights_lowp.at(wte_);
  for (int r0 = 0, n = 0; r0 < rows; r0 += n) {
    n = chunks.at(r0);
    const size_t at = static_cast<size_t>(r0);
    lowp16* logits = logits_.data() + (drops_logits() ? 0 : at * vocab_);
    gemm_lowp(backend_, gemm_nt(n, vocab_, c, x + at * c, c, wte, c, logits, vocab_));
    // While the chunk is fresh: its loss, and its gradient over it.
    SoftmaxXentFusedRows xent;
    xent.logits_to_grad = logits;
    xent.labels = labels + at;
    xent.rows = n;
    xent.cols = vocab_;
    xent.real_cols = real_vocab_;
    xent.total_rows = rows;
    xent.loss_scale = scale;
    xent.row_loss = row_loss_.data() + at;
    softmax_xent_fused_rows(backend_, xent);
    if (!drops_logits()) continue;
    // And, dropped, its backward before the next chunk overwrites it: dx
    // [n, C] = dlogits [n, V] wte [V, C] (backward()'s row pieces, so its
    // bits), and d_wte [V, C] (+)= dlogits [n, V]^T x [n, C] in FP32.
    gemm_lowp(backend_, gemm_nn(n, c, vocab_, logits, vocab_, wte, c, dx_.data() + at * c, c));
    GemmLowpToFp32 d_head;
    d_head.gemm = gemm_tn(vocab_, c, n, logits, vocab_, x + at * c, c, nullptr, c);
    d_head.gemm.beta = r0 == 0 ? 0.0f : 1.0f;
    d_head.c_fp32 = d_wte_sum_fp32_.data();
    gemm_lowp_to_fp32(backend_, d_head);
  }
  LossRowsMean mean;
  mean.row_loss = row_loss_.data();
  mean.rows = rows;
  mean.loss_mean = loss_mean;
  loss_rows_mean(backend_, mean);
}

void TiedClassifier::backward(const lowp16* x, int rows, const WeightTable& weights_lowp, const GradTable& grads_lowp,
                              bool accumulate, lowp16* dx) const {
  const int c = channels_;
  if (drops_logits()) {  // forward_with_loss did the GEMMs: round d_wte's sum once, hand dx over
    const size_t count = static_cast<size_t>(vocab_) * c;
    if (accumulate) {
      AddFp32IntoLowp add;
      add.src = d_wte_sum_fp32_.data();
      add.y = grads_lowp.at(wte_);
      add.count = count;
      add_fp32_into_lowp(backend_, add);
    } else {
      CastFp32ToLowp cast;
      cast.src = d_wte_sum_fp32_.data();
      cast.dst = grads_lowp.at(wte_);
      cast.count = count;
      cast_fp32_to_lowp(backend_, cast);
    }
    backend_.copy_on_device(dx, dx_.data(), static_cast<size_t>(rows) * c * sizeof(lowp16));
    return;
  }
  const lowp16* dlogits = chunked() ? logits_.data() : output_grad_.data();
  lowp16* d_wte = grads_lowp.at(wte_);
  // d_wte [V, C] = dlogits [R, V]^T x [R, C], by vocabulary rows: the head's
  // part (the embedding adds its own last).
  const Pieces pieces = vocab_pieces(vocab_, rows, chunked() ? chunk_rows_ : rows, c);
  for (int v0 = 0, n = 0; v0 < vocab_; v0 += n) {
    n = pieces.at(v0);
    const size_t at = static_cast<size_t>(v0);
    GemmLowp d_head = gemm_tn(n, c, rows, dlogits + at, vocab_, x, c, d_wte + at * c, c);
    d_head.beta = accumulate ? 1.0f : 0.0f;
    gemm_lowp(backend_, d_head);
  }
  // dx [R, C] = dlogits [R, V] wte [V, C], by rows.
  const Pieces chunks = row_pieces(rows, chunked() ? chunk_rows_ : rows, vocab_, c);
  for (int r0 = 0, n = 0; r0 < rows; r0 += n) {
    n = chunks.at(r0);
    const size_t at = static_cast<size_t>(r0);
    gemm_lowp(backend_, gemm_nn(n, c, vocab_, dlogits + at * vocab_, vocab_, weights_lowp.at(wte_), c, dx + at * c, c));
  }
}

}  // namespace ddp
