// test_step_state.cpp: the updates of the device-resident step state
// (kernels/ops/step_state.h), FP16 and BF16: the CUDA rows (one-thread
// kernels) against the CPU rows (step_status.h's host functions on host
// memory) (op_test_support.h). Tolerances as tests/cuda/
// cuda_test_optimizer.cpp: the step state is doubles and integers from the
// same header code: bitwise.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/ops/op_test_support.h"
#include "kernels/ops/step_state.h"
#include "support/test_cuda_op_context.h"

namespace ddp::test {
namespace {

class StepState : public OpTest {
 protected:
  CpuBackend cpu{2, precision()};
  TestCudaOpContext cuda{precision()};
};

// prepare and finish on the CUDA rows give the CPU rows' state (the host
// functions) field for field (the same header code, doubles and integers:
// bitwise) over random runs of overflows, for a dynamic rule with
// hysteresis, a floor and a give-up count, and for a static one.
TEST_P(StepState, PrepareAndFinishMatchTheHost) {
  SCOPED_TRACE(seed_text());
  LossScaleRule dynamic_rule;
  dynamic_rule.growth_interval = 3;
  dynamic_rule.hysteresis = 2;
  dynamic_rule.min_scale = 2.0;
  dynamic_rule.max_bad_steps = 3;
  LossScaleRule static_rule;
  static_rule.dynamic = 0;
  for (const LossScaleRule& rule : {dynamic_rule, static_rule}) {
    const std::string what = rule.dynamic ? "dynamic rule" : "static rule";
    StepStatus host{};
    host.scale = 65536.0;
    host.hysteresis_left = rule.hysteresis;
    DeviceArray<StepStatus> dev(std::vector<StepStatus>{host});
    StepStatusFinish finish;
    finish.rule = rule;
    for (int i = 0; i < 200; ++i) {
      const bool overflow = rng() % 3 == 0;
      StepStatusPrepare prepare;
      prepare.backward_divisor = 1 + static_cast<double>(rng() % 4);
      prepare.unscale_divisor = 0.5 * (1 + rng() % 8);
      prepare.lr = 0.001f * static_cast<float>(1 + rng() % 100);
      prepare.status = &host;
      step_status_prepare(cpu, prepare);
      prepare.status = dev.get();
      step_status_prepare_cuda(cuda, prepare);
      if (overflow) {
        host.nonfinite = 1;
        std::vector<StepStatus> flagged = dev.download();
        flagged[0].nonfinite = 1;
        dev.upload(flagged);
      }
      finish.status = &host;
      step_status_finish(cpu, finish);
      finish.status = dev.get();
      step_status_finish_cuda(cuda, finish);
      const StepStatus got = dev.download()[0];
      ASSERT_EQ(std::memcmp(&got, &host, sizeof got), 0)
          << what << ", step " << i << ": scale " << got.scale << " vs " << host.scale << ", skipped "
          << got.skipped_total << " vs " << host.skipped_total;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, StepState, ::testing::ValuesIn(kBothPrecisions), precision_test_name);

}  // namespace
}  // namespace ddp::test
