// test_loss_scaler.cpp: exact sequences of scales and skips for both rules.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "kernels/error.h"
#include "trainer/optim/loss_scaler.h"

namespace ddp {
namespace {

struct Trace {
  std::vector<double> scales;  // scale used at each step
  std::vector<bool> skipped;
};

Trace run(LossScaler& s, int steps, const std::set<int>& overflow_at) {
  Trace t;
  for (int i = 0; i < steps; ++i) {
    t.scales.push_back(s.scale());
    const bool ovf = overflow_at.count(i) > 0;
    t.skipped.push_back(ovf);
    s.update(ovf);
  }
  return t;
}

// An independent transcription of torch.cuda.amp.GradScaler's update rule.
std::vector<double> torch_grad_scaler(double scale, double growth, double backoff, int interval, int steps,
                                      const std::set<int>& overflow_at) {
  std::vector<double> out;
  int tracker = 0;
  for (int i = 0; i < steps; ++i) {
    out.push_back(scale);
    if (overflow_at.count(i)) {
      scale *= backoff;
      tracker = 0;
    } else if (++tracker == interval) {
      scale *= growth;
      tracker = 0;
    }
  }
  return out;
}

TEST(LossScalerDynamic, MatchesGradScalerWithHysteresisOne) {
  LossScalerConfig c;
  c.init_scale = 1024;
  c.growth_interval = 3;
  LossScaler s(c);
  const std::set<int> ovf = {0, 1, 5, 9, 10, 11, 20};
  const Trace t = run(s, 30, ovf);
  EXPECT_EQ(t.scales, torch_grad_scaler(1024, 2, 0.5, 3, 30, ovf));
  // Spot-check by hand: 1024 -> overflow -> 512 -> overflow -> 256, then 3 clean steps grow to 512.
  EXPECT_EQ(t.scales[0], 1024);
  EXPECT_EQ(t.scales[1], 512);
  EXPECT_EQ(t.scales[2], 256);
  EXPECT_EQ(t.scales[5], 512);
  EXPECT_EQ(t.scales[6], 256);
}

TEST(LossScalerDynamic, HysteresisBacksOffOnlyWhenExhausted) {
  LossScalerConfig c;
  c.init_scale = 65536;
  c.growth_interval = 4;
  c.hysteresis = 2;
  LossScaler s(c);
  // step: 0 ovf (hyst 2->1, no backoff), 1 ovf (hyst 0 -> backoff 32768),
  // 2 ovf (hyst -1 -> backoff 16384), 3..6 clean (growth at the 4th: 32768, hyst reset 2),
  // 7 ovf (hyst 1, no backoff), 8 clean, 9 ovf (hyst 0 -> 16384).
  const Trace t = run(s, 11, {0, 1, 2, 7, 9});
  const std::vector<double> want = {65536, 65536, 32768, 16384, 16384, 16384, 16384, 32768, 32768, 32768, 16384};
  EXPECT_EQ(t.scales, want);
  EXPECT_EQ(s.state().hysteresis_left, 0);
}

TEST(LossScalerDynamic, MinScaleIsAFloor) {
  LossScalerConfig c;
  c.init_scale = 8;
  c.min_scale = 2;
  c.growth_interval = 1000;
  LossScaler s(c);
  run(s, 10, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  EXPECT_EQ(s.scale(), 2);
}

TEST(LossScalerDynamic, GrowthNeverReachesInfinity) {
  LossScalerConfig c;
  c.init_scale = 1e38;
  c.growth_interval = 1;
  LossScaler s(c);
  run(s, 5, {});
  EXPECT_EQ(s.scale(), 2e38);  // 4e38 would be Inf in FP32: growth stops at 2e38
}

TEST(LossScalerModes, StaticAndNoneNeverChange) {
  LossScalerConfig c;
  parse_loss_scale_mode("static:128", c);
  EXPECT_EQ(c.mode, LossScaleMode::Static);
  LossScaler st(c);
  const Trace t = run(st, 10, {1, 2, 3});
  for (double v : t.scales) EXPECT_EQ(v, 128);
  LossScalerConfig n;
  parse_loss_scale_mode("none", n);
  LossScaler none(n);
  EXPECT_EQ(none.scale(), 1);
  run(none, 5, {0});
  EXPECT_EQ(none.scale(), 1);
}

TEST(LossScalerModes, ParsingRejectsMalformed) {
  LossScalerConfig c;
  for (const char* bad : {"static:", "static:-1", "static:abc", "static:inf", "dynamik", ""})
    EXPECT_THROW(parse_loss_scale_mode(bad, c), Error) << bad;
  parse_loss_scale_mode("static:1e12", c);
  EXPECT_EQ(c.init_scale, 1e12);
}

}  // namespace
}  // namespace ddp
