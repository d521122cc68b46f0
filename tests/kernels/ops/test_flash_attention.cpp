// test_flash_attention.cpp: the fused causal attention (kernels/ops/
// flash_attention.h): the CUDA rows (the forward; the backward's row dots
// D, dk/dv per key tile and dq per query tile) against the CPU rows and the
// double reference (support/flash_attention_support.h), FP16 and BF16
// (op_test_support.h). Head sizes from 1 to the CUDA row's
// kFlashCudaMaxHeadSize (from 95 the backward opts in to more than 48 KB of
// shared memory; the forward's tiles are exactly 48 KB at 127 and opt in at
// 128), sequences inside one tile of 32 and not a multiple of it; head
// sizes past the limit refused.
//
// Tolerance (tests/cuda/cuda_test_flash_attention.cpp's), per tensor X with
// M = max |X_cpu|: |kernel - cpu| <= fmt.rel_tol() |cpu| + 2^-10 M (BF16:
// both terms 8x), plus twice the double reference's FP32 cancellation floor
// for dq and dk; the kernel is also held to the double reference with that
// rule (the floor once). The two sides sum in other orders (lane FMA chains
// against OpenBLAS's blocking) and exponentiate differently. lse (FP32):
// 1e-5 (1 + |lse|). D (FP32, the backward's scratch): an FP32 dot over the
// head size in two orders, fp32_order_rel_tol(hs) times sum |terms|.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_op_context.h"
#include "kernels/error.h"
#include "kernels/ops/flash_attention.h"
#include "kernels/ops/op_test_support.h"
#include "support/flash_attention_support.h"
#include "support/test_cuda_op_context.h"

namespace ddp::test {
namespace {

class FlashAttention : public OpTest {
 protected:
  CpuBackend cpu{2, precision()};
  TestCudaOpContext cuda{precision()};
};

std::vector<float> nan_floats(size_t count) {
  return std::vector<float>(count, std::numeric_limits<float>::quiet_NaN());
}

// A CudaOpContext whose scratch is a fresh array of exactly the bytes the
// row asks for, NaN-poisoned and kept after the call: the backward's D is
// read from it, and the executor fails any access past its end.
class KeptScratchContext final : public CudaOpContext {
 public:
  explicit KeptScratchContext(Precision precision) : precision_(precision) {}
  cudaStream_t stream() const override { return nullptr; }
  Precision precision() const override { return precision_; }
  void* scratch(size_t size_bytes) override {
    requested_bytes = size_bytes;
    kept = std::make_unique<DeviceArray<float>>(nan_floats((size_bytes + sizeof(float) - 1) / sizeof(float)));
    return kept->get();
  }
  CublasLtGemm& cublaslt_gemm() override { throw Error("KeptScratchContext has no cuBLASLt"); }
  size_t requested_bytes = 0;
  std::unique_ptr<DeviceArray<float>> kept;

 private:
  Precision precision_;
};

AttentionForwardFused forward_op(const lowp16* q, const lowp16* k, const lowp16* v, const FlashShape& s, float scale,
                                 lowp16* out, float* lse) {
  AttentionForwardFused op;
  op.q = q;
  op.k = k;
  op.v = v;
  op.batch_heads = s.bh;
  op.seq_len = s.T;
  op.head_size = s.hs;
  op.scale = scale;
  op.out = out;
  op.lse = lse;
  return op;
}

AttentionBackwardFused backward_op(const lowp16* q, const lowp16* k, const lowp16* v, const lowp16* out,
                                   const float* lse, const lowp16* dout, const FlashShape& s, float scale, lowp16* dq,
                                   lowp16* dk, lowp16* dv) {
  AttentionBackwardFused op;
  op.q = q;
  op.k = k;
  op.v = v;
  op.out = out;
  op.lse = lse;
  op.dout = dout;
  op.batch_heads = s.bh;
  op.seq_len = s.T;
  op.head_size = s.hs;
  op.scale = scale;
  op.dq = dq;
  op.dk = dk;
  op.dv = dv;
  return op;
}

// One row of head size 1; a tile's 32 rows not filled (T = 7), T = 33 and
// 70 (partial last tiles, three tiles: rescaled rows, off-diagonal tiles);
// head sizes odd, past 32 and 64 (a lane's second and third dimensions),
// and the limit: 127 (padded rows of 128 floats) and 128.
const FlashShape kFlashShapes[] = {{1, 1, 1},   {3, 7, 3},    {2, 33, 17}, {1, 70, 40},
                                   {2, 40, 65}, {1, 33, 127}, {1, 37, 128}};

// `got` against the CPU's `cpu` and the double reference `exact`
// (cuda_test_flash_attention.cpp's rule); floor: the reference's FP32
// cancellation floor (dq, dk), twice against the CPU (both sides round dS).
void expect_flash_close(const LowpFormat& fmt, const std::string& what, const std::vector<lowp16>& got,
                        const std::vector<lowp16>& cpu, const std::vector<double>& exact,
                        const std::vector<double>* floor = nullptr) {
  std::vector<double> both_sides;
  if (floor) {
    both_sides = *floor;
    for (double& f : both_sides) f *= 2;
  }
  const FlashError vs_cpu = flash_error(got, fmt.widened_doubles(cpu), floor ? &both_sides : nullptr, fmt);
  EXPECT_LE(vs_cpu.worst_fraction, 1.0) << "against the CPU: " << flash_error_text(what.c_str(), vs_cpu);
  const FlashError vs_exact = flash_error(got, exact, floor, fmt);
  EXPECT_LE(vs_exact.worst_fraction, 1.0) << "against double: " << flash_error_text(what.c_str(), vs_exact);
}

TEST_P(FlashAttention, ForwardMatchesTheCpu) {
  SCOPED_TRACE(seed_text());
  for (const FlashShape& s : kFlashShapes) {
    SCOPED_TRACE("flash forward " + s.text());
    const FlashInputs in = random_flash_inputs(rng, s, fmt);
    std::vector<lowp16> want_out = LowpFormat::poison(s.elems());
    std::vector<float> want_lse = nan_floats(s.rows());
    attention_forward_fused_lowp(
        cpu, forward_op(in.q.data(), in.k.data(), in.v.data(), s, s.scale(), want_out.data(), want_lse.data()));
    DeviceArray<lowp16> q(in.q), k(in.k), v(in.v), out(LowpFormat::poison(s.elems()));
    DeviceArray<float> lse(nan_floats(s.rows()));
    attention_forward_fused_lowp_cuda(cuda, forward_op(q.get(), k.get(), v.get(), s, s.scale(), out.get(), lse.get()));
    const FlashReference exact = flash_reference(in, s);
    expect_flash_close(fmt, "out", out.download(), want_out, exact.out);
    const std::vector<float> got_lse = lse.download();
    for (size_t i = 0; i < got_lse.size(); ++i)
      ASSERT_NEAR(got_lse[i], want_lse[i], kFlashLseTol * (1.0 + std::fabs(want_lse[i]))) << "lse row " << i;
  }
}

// From the CPU's out and lse (both backwards see the same D inputs);
// outputs and the scratch poisoned first.
TEST_P(FlashAttention, BackwardMatchesTheCpu) {
  SCOPED_TRACE(seed_text());
  for (const FlashShape& s : kFlashShapes) {
    SCOPED_TRACE("flash backward " + s.text());
    const FlashInputs in = random_flash_inputs(rng, s, fmt);
    std::vector<lowp16> out(s.elems());
    std::vector<float> lse(s.rows());
    attention_forward_fused_lowp(
        cpu, forward_op(in.q.data(), in.k.data(), in.v.data(), s, s.scale(), out.data(), lse.data()));
    std::vector<lowp16> want_dq = LowpFormat::poison(s.elems()), want_dk = want_dq, want_dv = want_dq;
    attention_backward_fused_lowp(
        cpu, backward_op(in.q.data(), in.k.data(), in.v.data(), out.data(), lse.data(), in.dout.data(), s, s.scale(),
                         want_dq.data(), want_dk.data(), want_dv.data()));
    DeviceArray<lowp16> q(in.q), k(in.k), v(in.v), d_out(out), dout(in.dout);
    DeviceArray<float> d_lse(lse);
    DeviceArray<lowp16> dq(LowpFormat::poison(s.elems())), dk(LowpFormat::poison(s.elems())),
        dv(LowpFormat::poison(s.elems()));
    KeptScratchContext scratch_cuda(precision());
    attention_backward_fused_lowp_cuda(
        scratch_cuda, backward_op(q.get(), k.get(), v.get(), d_out.get(), d_lse.get(), dout.get(), s, s.scale(),
                                  dq.get(), dk.get(), dv.get()));
    ASSERT_EQ(scratch_cuda.requested_bytes, s.rows() * sizeof(float));  // D [bh, T] FP32
    const FlashReference given = flash_reference(in, s, &out);
    expect_flash_close(fmt, "dq", dq.download(), want_dq, given.dq, &given.dq_floor);
    expect_flash_close(fmt, "dk", dk.download(), want_dk, given.dk, &given.dk_floor);
    expect_flash_close(fmt, "dv", dv.download(), want_dv, given.dv);
    // D = rowsum(dout * out), the row dots kernel's output.
    const std::vector<float> d = scratch_cuda.kept->download();
    const size_t hs = static_cast<size_t>(s.hs);
    for (size_t row = 0; row < s.rows(); ++row) {
      double sum = 0, magnitude = 0;
      for (size_t c = 0; c < hs; ++c) {
        const double term = static_cast<double>(fmt.widen(in.dout[row * hs + c])) * fmt.widen(out[row * hs + c]);
        sum += term;
        magnitude += std::fabs(term);
      }
      ASSERT_NEAR(d[row], sum, fp32_order_rel_tol(hs) * magnitude) << "D row " << row;
    }
  }
}

// Nothing to do (no heads, no positions): nothing written.
TEST_P(FlashAttention, EmptyShapesWriteNothing) {
  DeviceArray<lowp16> x(LowpFormat::poison(8));
  DeviceArray<float> lse(nan_floats(2));
  for (const FlashShape s : {FlashShape{0, 4, 2}, FlashShape{2, 0, 2}}) {
    attention_forward_fused_lowp_cuda(cuda, forward_op(x.get(), x.get(), x.get(), s, 1.0f, x.get(), lse.get()));
    attention_backward_fused_lowp_cuda(
        cuda, backward_op(x.get(), x.get(), x.get(), x.get(), lse.get(), x.get(), s, 1.0f, x.get(), x.get(), x.get()));
  }
  for (const lowp16 h : x.download()) EXPECT_EQ(h.bits, kPoisonHalfBits);
}

// Head sizes outside 1..kFlashCudaMaxHeadSize: the ddp::Error that sends
// the caller to the explicit path, before anything is written.
TEST_P(FlashAttention, HeadSizesOutsideTheKernelsLimitAreRefused) {
  const int T = 4;
  for (const int hs : {kFlashCudaMaxHeadSize + 1, 0}) {
    SCOPED_TRACE("head_size " + std::to_string(hs));
    const size_t elems = static_cast<size_t>(T) * std::max(hs, 1);
    DeviceArray<lowp16> x(LowpFormat::poison(elems)), out(LowpFormat::poison(elems));
    DeviceArray<float> lse(nan_floats(T));
    const FlashShape s{1, T, hs};
    try {
      attention_forward_fused_lowp_cuda(cuda, forward_op(x.get(), x.get(), x.get(), s, 1.0f, out.get(), lse.get()));
      ADD_FAILURE() << "forward: head_size " << hs << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("kFlashCudaMaxHeadSize"), std::string::npos) << e.what();
    }
    try {
      attention_backward_fused_lowp_cuda(cuda, backward_op(x.get(), x.get(), x.get(), x.get(), lse.get(), x.get(), s,
                                                           1.0f, out.get(), out.get(), out.get()));
      ADD_FAILURE() << "backward: head_size " << hs << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("kFlashCudaMaxHeadSize"), std::string::npos) << e.what();
    }
    for (const lowp16 h : out.download()) EXPECT_EQ(h.bits, kPoisonHalfBits);
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, FlashAttention, ::testing::ValuesIn(kBothPrecisions), precision_test_name);

}  // namespace
}  // namespace ddp::test
