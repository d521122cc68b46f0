// cuda_test_step_state.cpp: the device-resident step state against the CPU
// backend's, a captured step (CUDA graph) that reads it on every replay, and
// the refusal of buffer growth around a capture. Tolerances:
// cuda_test_support.h.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/cuda/cuda_gemm_route.h"
#include "kernels/ops/gemm.h"
#include "cuda_test_support.h"
#include "kernels/ops/sgd.h"
#include "kernels/ops/softmax_xent.h"
#include "kernels/ops/step_state.h"
#include "kernels/ops/unscale.h"
#include "support/gemm_epilogue_support.h"

namespace ddp {
namespace {

using namespace test;  // cuda_test_support.h: CudaKernels, comparisons, tolerances

// ---- step state and capture --------------------------------------------------------

// The device-resident step state: prepare and finish on the GPU give the
// CPU backend's state field for field over a random run of overflows (the
// rule is the same header code; doubles and integers, so bitwise).
TEST_F(CudaKernels, StepStatePrepareAndFinishMatchTheCpu) {
  SCOPED_TRACE(seed_text());
  LossScaleRule rule;
  rule.growth_interval = 3;
  rule.hysteresis = 2;
  rule.min_scale = 2.0;
  rule.max_bad_steps = 3;
  StepStatus host{};
  host.scale = 65536.0;
  host.hysteresis_left = rule.hysteresis;
  Buffer<StepStatus> dev(*gpu, 1);
  gpu->copy_to_device(dev.data(), &host, sizeof host);
  for (int i = 0; i < 300; ++i) {
    const bool overflow = rng() % 3 == 0;
    const double backward_divisor = 1 + static_cast<double>(rng() % 4), unscale_divisor = 0.5 * (1 + rng() % 8);
    const float lr = 0.001f * static_cast<float>(1 + rng() % 100);
    StepStatusPrepare prepare;
    prepare.status = &host;
    prepare.backward_divisor = backward_divisor;
    prepare.unscale_divisor = unscale_divisor;
    prepare.lr = lr;
    step_status_prepare(cpu, prepare);
    prepare.status = dev.data();
    step_status_prepare(*gpu, prepare);
    if (overflow) {
      host.nonfinite = 1;
      const int32_t one = 1;
      gpu->copy_to_device(&dev.data()->nonfinite, &one, sizeof one);
    }
    StepStatusFinish finish;
    finish.rule = rule;
    finish.status = &host;
    step_status_finish(cpu, finish);
    finish.status = dev.data();
    step_status_finish(*gpu, finish);
    StepStatus got{};
    gpu->copy_to_host(&got, dev.data(), sizeof got);
    ASSERT_EQ(std::memcmp(&got, &host, sizeof got), 0)
        << "step " << i << ": scale " << got.scale << " vs " << host.scale;
  }
}

// A captured step (CUDA graph) reads its scalars from the step state when
// it is replayed: unscale + fused SGD captured once, replayed after the
// state changed (scale, lr, momentum start), equals the eager CPU step on
// the new values; a set flag skips the replayed update.
TEST_F(CudaKernels, CapturedStepReadsTheStepStateOnEveryReplay) {
  SCOPED_TRACE(seed_text());
  const size_t n = 50021;
  const auto grads_host = test::random_halves(rng, n, -2000.0f, 2000.0f);
  const auto master_host = test::random_floats(rng, n), momentum_host = test::random_floats(rng, n);
  Pair<lowp16> grads = both(grads_host), weights = both(test::poison_halves(n));
  Pair<float> master = both(master_host), momentum = both(momentum_host);
  Buffer<StepStatus> dev(*gpu, 1);
  StepStatus host{};
  host.scale = 1024.0;
  gpu->copy_to_device(dev.data(), &host, sizeof host);
  auto queue_step = [&](Backend& be, StepStatus* st, Buffer<lowp16>& g, Buffer<float>& m, Buffer<float>& mom,
                        Buffer<lowp16>& w) {
    SgdParams p;
    p.momentum = 0.9f;
    p.weight_decay = 1e-4f;
    p.lr_ptr = &st->lr;
    p.momentum_initialized = &st->momentum_initialized;
    UnscaleLowpToFp32 unscale;
    unscale.grads_lowp = g.data();
    unscale.grads_fp32 = nullptr;
    unscale.count = n;
    unscale.inv_scale = ScalarArg::at(&st->inv_scale);
    unscale.nonfinite_flag = &st->nonfinite;
    unscale_lowp_to_fp32(be, unscale);
    SgdUpdate sgd;
    sgd.params = p;
    sgd.grads = SgdGrads::scaled(g.data(), ScalarArg::at(&st->inv_scale));
    sgd.master_fp32 = m.data();
    sgd.momentum_fp32 = mom.data();
    sgd.weights_lowp = w.data();
    sgd.count = n;
    sgd.skip_flag = &st->nonfinite;
    sgd_update(be, sgd);
    StepStatusFinish finish;
    finish.rule = LossScaleRule{};
    finish.status = st;
    step_status_finish(be, finish);
  };
  gpu->begin_capture();
  queue_step(*gpu, dev.data(), grads.gpu, master.gpu, momentum.gpu, weights.gpu);
  const int graph = gpu->end_capture();
  for (int replay = 0; replay < 4; ++replay) {
    const double divisor = 1.0 + replay;
    const float lr = 0.01f * static_cast<float>(replay + 1);
    StepStatusPrepare prepare;
    prepare.status = &host;
    prepare.backward_divisor = 1.0;
    prepare.unscale_divisor = divisor;
    prepare.lr = lr;
    step_status_prepare(cpu, prepare);
    prepare.status = dev.data();
    step_status_prepare(*gpu, prepare);
    queue_step(cpu, &host, grads.cpu, master.cpu, momentum.cpu, weights.cpu);
    gpu->replay(graph);
    expect_close(master.gpu.download(), master.cpu.download(), kFp32RelTol, 1e-6, "master after replay");
    expect_close(momentum.gpu.download(), momentum.cpu.download(), kFp32RelTol, 1e-6, "momentum after replay");
    StepStatus got{};
    gpu->copy_to_host(&got, dev.data(), sizeof got);
    EXPECT_EQ(got.scale, host.scale);
    EXPECT_EQ(got.momentum_initialized, 1);
  }
  // An Inf gradient: the replayed check flags it and the update is skipped.
  auto bad = grads_host;
  bad[rng() % n].bits = 0x7c00;
  grads.gpu.upload(bad);
  const auto before = master.gpu.download();
  StepStatusPrepare prepare;
  prepare.status = dev.data();
  prepare.backward_divisor = 1.0;
  prepare.unscale_divisor = 1.0;
  prepare.lr = 0.5f;
  step_status_prepare(*gpu, prepare);
  gpu->replay(graph);
  EXPECT_EQ(master.gpu.download(), before);
  StepStatus got{};
  gpu->copy_to_host(&got, dev.data(), sizeof got);
  EXPECT_EQ(got.last_skipped, 1);
  EXPECT_EQ(got.skipped_total, 1);
  // Host waits inside a capture are refused, and the stream stays usable.
  gpu->begin_capture();
  EXPECT_THROW(gpu->synchronize(), Error);
  gpu->end_capture();
  gpu->synchronize();
}

// The message of the ddp::Error `call` throws; "" when it throws none.
template <class F>
std::string error_of(F&& call) {
  try {
    call();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST_F(CudaKernels, BufferGrowthAroundACaptureIsRefused) {
  SCOPED_TRACE(seed_text());
  // A captured graph keeps raw pointers, so the buffers grown on demand
  // (graph_safe_growth.h) must refuse to grow inside a capture and, once a
  // graph exists, rather than free a block it uses. GELU forward with a
  // pre-activation output takes the FP32 scratch route; a bias view at an
  // odd offset is staged.
  test::EpilogueCase small{8, 16, 32}, large{64, 256, 32};
  for (auto* c : {&small, &large}) {
    c->trans_b = Transpose::Yes;
    c->bias = true;
    c->act = Activation::Gelu;
  }
  for (auto* c : {&small, &large}) c->pre_activation = true;
  test::EpilogueCase small_bias = small, large_bias = large;  // plain GEMM + BIAS from the staging copy
  for (auto* c : {&small_bias, &large_bias}) {
    c->act = Activation::None;
    c->pre_activation = false;
    c->offset = 1;
  }
  // Eager runs of the small shapes allocate the scratch and the staging.
  test::run_epilogue_case(*gpu, small, test::make_epilogue_inputs(rng, small));
  test::run_epilogue_case(*gpu, small_bias, test::make_epilogue_inputs(rng, small_bias));
  // (The staging is made whether or not cuBLASLt then has an algorithm.)
  ASSERT_EQ(gpu->gemm_route_counts_for_testing()[GemmRoute::kLtFp32ThenEpilogue], 1)
      << "GELU did not take the FP32 scratch route: the scratch checks below would check nothing";

  // Every buffer a GEMM below touches exists before the capture.
  struct Operands {
    Buffer<lowp16> a, b, bias, z, out, pre, db;
    GemmLowp g;
  };
  auto operands = [&](const test::EpilogueCase& c) {
    const auto in = test::make_epilogue_inputs(rng, c);
    Operands o{Buffer<lowp16>(*gpu, in.a.size()),          Buffer<lowp16>(*gpu, in.b.size()),
               Buffer<lowp16>(*gpu, in.bias.size()),       Buffer<lowp16>(*gpu, in.dact_input.size()),
               Buffer<lowp16>(*gpu, in.c0.size()),         Buffer<lowp16>(*gpu, c.c_count()),
               Buffer<lowp16>(*gpu, in.bias_grad0.size()), GemmLowp{}};
    o.a.upload(in.a);
    o.b.upload(in.b);
    o.bias.upload(in.bias);
    o.g = test::epilogue_gemm(c, o.a.data(), o.b.data(), o.bias.data(), o.z.data(), o.out.data(), o.pre.data(),
                              o.db.data());
    return o;
  };
  Operands small_ops = operands(small), large_ops = operands(large), large_bias_ops = operands(large_bias);
  const int rows = 100000;  // cross-entropy scratch beyond the initial 64 KiB
  Buffer<lowp16> logits(*gpu, static_cast<size_t>(rows) * 2);
  Buffer<int32_t> labels(*gpu, rows);
  Buffer<float> loss(*gpu, 1);
  gpu->fill_zero(logits.data(), logits.count() * sizeof(lowp16));
  gpu->fill_zero(labels.data(), labels.count() * sizeof(int32_t));
  SoftmaxXentForward xent;
  xent.logits = logits.data();
  xent.labels = labels.data();
  xent.rows = rows;
  xent.cols = 2;
  xent.real_cols = 2;
  xent.loss_mean = loss.data();
  xent.correct_count = nullptr;

  // Inside the capture (the reduction scratch: its check comes before any
  // CUDA call, so the capture stays valid; the GEMM's large shape would
  // first query cuBLASLt's heuristic inside the capture).
  gpu->begin_capture();
  std::string what = error_of([&] { softmax_xent_forward(*gpu, xent); });
  EXPECT_NE(
      what.find("CudaBackend reduction scratch would grow from 65536 to 800000 bytes inside a CUDA graph capture"),
      std::string::npos)
      << what;
  gemm_lowp(*gpu, small_ops.g);  // fits: captured as usual
  const int graph = gpu->end_capture();
  gpu->replay(graph);
  gpu->synchronize();

  what = error_of([&] { gemm_lowp(*gpu, large_ops.g); });
  EXPECT_NE(what.find("GEMM FP32 accumulator scratch would grow from 512 to 65536 bytes after a CUDA graph capture"),
            std::string::npos)
      << what;
  what = error_of([&] { gemm_lowp(*gpu, large_bias_ops.g); });
  EXPECT_NE(what.find("GEMM bias staging would grow from 32 to 512 bytes after a CUDA graph capture"),
            std::string::npos)
      << what;
  what = error_of([&] { softmax_xent_forward(*gpu, xent); });
  EXPECT_NE(what.find("CudaBackend reduction scratch would grow from 65536 to 800000 bytes after a CUDA graph capture"),
            std::string::npos)
      << what;
  // Nothing was freed: the graph still replays, and small GEMMs still run.
  gpu->replay(graph);
  gemm_lowp(*gpu, small_ops.g);
  gpu->synchronize();
}

// A device buffer made inside a capture would invalidate it at
// end_capture with an opaque error: the allocation says so itself.
TEST_F(CudaKernels, AllocatingInsideACaptureIsRefusedByName) {
  gpu->begin_capture();
  try {
    Buffer<float> made_inside(*gpu, 16);
    ADD_FAILURE() << "a 64-byte buffer was allocated inside a capture";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("inside a CUDA graph capture"), std::string::npos) << e.what();
  }
  gpu->end_capture();
  gpu->release_captures();
}

}  // namespace
}  // namespace ddp
