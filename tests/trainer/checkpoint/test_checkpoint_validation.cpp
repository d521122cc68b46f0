// test_checkpoint_validation.cpp: validate_checkpoint_contents on states
// built here: random valid states pass; one bad field at a time, for every
// field and each of its bounds, is refused with one line naming the field
// and its value, and the first value just inside each bound passes. The
// loss scaler's bounds are cross-checked against the rule itself.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "support/test_support.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/checkpoint_validation.h"
#include "trainer/config/train_config.h"
#include "trainer/optim/loss_scaler.h"

namespace ddp {
namespace {

constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

uint64_t mlp_params(const std::vector<int64_t>& widths) {
  uint64_t count = 0;
  for (size_t i = 0; i + 1 < widths.size(); ++i) count += widths[i] * widths[i + 1] + widths[i + 1];
  return count;
}

int64_t uniform(std::mt19937_64& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

// A state the trainer could have written: random shape and fresh random
// weights, a position with 1 <= epoch + 1 <= step, some skipped steps, and
// scaler fields inside their bounds.
TrainState valid_state(std::mt19937_64& rng) {
  TrainState s;
  const int64_t layers = uniform(rng, 2, 4);
  for (int64_t i = 0; i < layers; ++i) s.model_dims.push_back(uniform(rng, 1, 9));
  s.activation = rng() % 2 ? "relu" : "gelu";
  s.loss = rng() % 2 ? "xent" : "mse";
  const size_t params = mlp_params(s.model_dims);
  s.master_weights_fp32 = test::random_floats(rng, params, -3.0f, 3.0f);
  s.momentum_fp32 = test::random_floats(rng, params, -3.0f, 3.0f);
  s.step = uniform(rng, 2, 100000);
  s.skipped_steps = uniform(rng, 0, s.step - 1);
  s.momentum_initialized = true;  // step > skipped_steps
  s.epoch = uniform(rng, 0, s.step - 1);
  s.epoch_sample_offset = uniform(rng, 0, 1 << 20);
  s.scaler.scale = std::ldexp(1.0, static_cast<int>(uniform(rng, -20, 40)));
  s.scaler.growth_tracker = uniform(rng, 0, s.step - s.skipped_steps);
  s.scaler.hysteresis_left = uniform(rng, 1 - s.skipped_steps, 4);
  s.seed = rng();
  s.optimizer_steps = s.step - s.skipped_steps;  // every clean step took one
  return s;
}

// The problem text of the CheckpointError validation throws ("" if none);
// the error must be one line and name the file.
// The optimizer's step count follows the position (every clean step took
// one) unless a test sets it apart: `own_optimizer_steps`.
std::string problem_of(TrainState s, bool own_optimizer_steps = false) {
  if (!own_optimizer_steps) s.optimizer_steps = s.step - s.skipped_steps;
  try {
    validate_checkpoint_contents(s, "run/ck.ddpckpt");
  } catch (const CheckpointError& e) {
    const std::string text = e.what();
    EXPECT_EQ(text.find('\n'), std::string::npos) << text;
    EXPECT_EQ(text.rfind("checkpoint run/ck.ddpckpt: corrupt contents: ", 0), 0u) << text;
    return e.problem();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

class CheckpointValidation : public ::testing::Test {
 protected:
  void SetUp() override {
    seed_ = test::test_seed();
    rng_.seed(seed_);
  }
  // Applies `bad` to a fresh valid state: refused, naming every word. Then
  // `inside` (the first value within that bound) to another one: accepted.
  void expect_bound(const std::string& what, const std::function<void(TrainState&)>& bad,
                    const std::vector<std::string>& words, const std::function<void(TrainState&)>& inside) {
    SCOPED_TRACE(what + ", DDP_TEST_SEED=" + std::to_string(seed_));
    TrainState s = valid_state(rng_);
    bad(s);
    const std::string problem = problem_of(s);
    EXPECT_FALSE(problem.empty()) << what << " was accepted";
    for (const std::string& w : words) EXPECT_TRUE(contains(problem, w)) << "'" << w << "' not in: " << problem;
    TrainState ok = valid_state(rng_);
    inside(ok);
    EXPECT_EQ(problem_of(ok), "") << what << ": the value just inside the bound was refused";
  }
  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
};

TEST_F(CheckpointValidation, RandomValidStatesPass) {
  SCOPED_TRACE("DDP_TEST_SEED=" + std::to_string(seed_));
  for (int i = 0; i < 200; ++i) EXPECT_EQ(problem_of(valid_state(rng_)), "");
}

TEST_F(CheckpointValidation, FreshRunAtStepZeroPasses) {
  TrainState s = valid_state(rng_);
  s.step = s.epoch = s.epoch_sample_offset = s.skipped_steps = 0;
  s.momentum_initialized = false;
  s.scaler = LossScaler(LossScalerConfig{}).state();
  EXPECT_EQ(problem_of(s), "");
}

TEST_F(CheckpointValidation, PositionBounds) {
  expect_bound(
      "step -5", [](TrainState& s) { s.step = -5; }, {"step is -5", ">= 0"},
      [](TrainState& s) {
        s.step = s.epoch = s.epoch_sample_offset = s.skipped_steps = 0;
        s.momentum_initialized = false;
        s.scaler.growth_tracker = 0;
        s.scaler.hysteresis_left = 1;
      });
  expect_bound(
      "step INT64_MIN", [](TrainState& s) { s.step = kI64Min; }, {"step is " + std::to_string(kI64Min)},
      [](TrainState& s) { s.step = kMaxTrainSteps; });
  expect_bound(
      "step 2^40 + 1", [](TrainState& s) { s.step = kMaxTrainSteps + 1; }, {"step is 1099511627777", "2^40"},
      [](TrainState& s) { s.step = kMaxTrainSteps; });
  expect_bound(
      "step INT64_MAX", [](TrainState& s) { s.step = kI64Max; }, {"step is " + std::to_string(kI64Max)},
      [](TrainState& s) { s.step = kMaxTrainSteps; });
  expect_bound(
      "epoch -1", [](TrainState& s) { s.epoch = -1; }, {"epoch is -1", ">= 0"}, [](TrainState& s) { s.epoch = 0; });
  expect_bound(
      "epoch INT64_MIN", [](TrainState& s) { s.epoch = kI64Min; }, {"epoch is " + std::to_string(kI64Min)},
      [](TrainState& s) {
        s.epoch = 0;
        s.epoch_sample_offset = 0;
      });
  expect_bound(
      "offset -1", [](TrainState& s) { s.epoch_sample_offset = -1; }, {"epoch_sample_offset is -1"},
      [](TrainState& s) { s.epoch_sample_offset = 0; });
  expect_bound(
      "offset huge", [](TrainState& s) { s.epoch_sample_offset = kI64Min; }, {"epoch_sample_offset"},
      [](TrainState& s) { s.epoch_sample_offset = kI64Max; });
  expect_bound(
      "skipped -1", [](TrainState& s) { s.skipped_steps = -1; }, {"skipped_steps is -1"},
      [](TrainState& s) {
        s.skipped_steps = 0;
        s.scaler.hysteresis_left = 1;
      });
  // All steps skipped is possible (then the momentum is untouched and the
  // growth tracker 0); one more than the steps is not.
  expect_bound(
      "skipped > step", [](TrainState& s) { s.skipped_steps = s.step + 1; }, {"skipped_steps", "[0, step"},
      [](TrainState& s) {
        s.skipped_steps = s.step;
        s.momentum_initialized = false;
        s.scaler.growth_tracker = 0;
      });
  expect_bound(
      "epoch > step",
      [](TrainState& s) {
        s.epoch = s.step + 1;
        s.epoch_sample_offset = 0;
      },
      {"epoch is", "<= step"},
      [](TrainState& s) {
        s.epoch = s.step;
        s.epoch_sample_offset = 0;
      });
  expect_bound(
      "offset in an epoch without a step",
      [](TrainState& s) {
        s.epoch = s.step;
        s.epoch_sample_offset = 1;
      },
      {"epoch_sample_offset is 1", "step > epoch"},
      [](TrainState& s) {
        s.epoch = s.step - 1;
        s.epoch_sample_offset = 1;
      });
}

TEST_F(CheckpointValidation, LossScaleBounds) {
  auto set_scale = [](double v) { return [v](TrainState& s) { s.scaler.scale = v; }; };
  const double tiny = std::numeric_limits<double>::denorm_min();
  expect_bound("scale nan", set_scale(kNaN), {"loss scale is nan", "finite and > 0"}, set_scale(tiny));
  expect_bound("scale -nan", set_scale(-kNaN), {"loss scale is nan"}, set_scale(tiny));
  expect_bound("scale inf", set_scale(kInf), {"loss scale is inf"}, set_scale(std::numeric_limits<double>::max()));
  expect_bound("scale -inf", set_scale(-kInf), {"loss scale is -inf"}, set_scale(1.0));
  expect_bound("scale 0", set_scale(0.0), {"loss scale is 0 "}, set_scale(tiny));
  expect_bound("scale -0", set_scale(-0.0), {"loss scale is -0 "}, set_scale(tiny));
  expect_bound("scale -1", set_scale(-1.0), {"loss scale is -1 "}, set_scale(65536.0));
  expect_bound("scale -tiny", set_scale(-tiny), {"loss scale is -5e-324"}, set_scale(tiny));
}

TEST_F(CheckpointValidation, GrowthTrackerBounds) {
  expect_bound(
      "growth -1", [](TrainState& s) { s.scaler.growth_tracker = -1; }, {"growth_tracker is -1"},
      [](TrainState& s) { s.scaler.growth_tracker = 0; });
  expect_bound(
      "growth INT64_MIN", [](TrainState& s) { s.scaler.growth_tracker = kI64Min; },
      {"growth_tracker is " + std::to_string(kI64Min)}, [](TrainState& s) { s.scaler.growth_tracker = 0; });
  // It counts clean steps, so it cannot exceed them.
  expect_bound(
      "growth > clean steps", [](TrainState& s) { s.scaler.growth_tracker = s.step - s.skipped_steps + 1; },
      {"growth_tracker is"}, [](TrainState& s) { s.scaler.growth_tracker = s.step - s.skipped_steps; });
  expect_bound(
      "growth INT64_MAX", [](TrainState& s) { s.scaler.growth_tracker = kI64Max; },
      {"growth_tracker is " + std::to_string(kI64Max)},
      [](TrainState& s) { s.scaler.growth_tracker = s.step - s.skipped_steps; });
}

TEST_F(CheckpointValidation, HysteresisBounds) {
  // Before any skipped step it is --hysteresis >= 1; each skipped step may
  // lower it by one, past 0.
  expect_bound(
      "hysteresis 0 without a skipped step",
      [](TrainState& s) {
        s.skipped_steps = 0;
        s.scaler.hysteresis_left = 0;
      },
      {"hysteresis_left is 0", ">= 1"},
      [](TrainState& s) {
        s.skipped_steps = 0;
        s.scaler.hysteresis_left = 1;
      });
  expect_bound(
      "hysteresis below 1 - skipped", [](TrainState& s) { s.scaler.hysteresis_left = -s.skipped_steps; },
      {"hysteresis_left is"}, [](TrainState& s) { s.scaler.hysteresis_left = 1 - s.skipped_steps; });
  expect_bound(
      "hysteresis INT64_MIN", [](TrainState& s) { s.scaler.hysteresis_left = kI64Min; },
      {"hysteresis_left is " + std::to_string(kI64Min)}, [](TrainState& s) { s.scaler.hysteresis_left = kI64Max; });
}

TEST_F(CheckpointValidation, MomentumFlagFollowsCleanSteps) {
  expect_bound(
      "flag off after a clean step", [](TrainState& s) { s.momentum_initialized = false; },
      {"momentum_initialized is 0", "must be 1"},
      [](TrainState& s) {
        s.skipped_steps = s.step;
        s.scaler.growth_tracker = 0;
        s.momentum_initialized = false;
      });
  expect_bound(
      "flag on with every step skipped",
      [](TrainState& s) {
        s.skipped_steps = s.step;
        s.scaler.growth_tracker = 0;
      },
      {"momentum_initialized is 1", "must be 0"},
      [](TrainState& s) {
        s.skipped_steps = s.step - 1;
        s.scaler.growth_tracker = 1;
      });
}

TEST_F(CheckpointValidation, ModelShapeBounds) {
  auto resize = [](TrainState& s) {
    s.master_weights_fp32.assign(mlp_params(s.model_dims), 0.5f);
    s.momentum_fp32.assign(mlp_params(s.model_dims), -0.5f);
  };
  expect_bound(
      "no widths", [](TrainState& s) { s.model_dims.clear(); }, {"layer widths list 0"},
      [&](TrainState& s) {
        s.model_dims = {1, 1};
        resize(s);
      });
  expect_bound(
      "one width", [](TrainState& s) { s.model_dims.resize(1); }, {"layer widths list 1"},
      [&](TrainState& s) {
        s.model_dims.resize(2);
        resize(s);
      });
  const size_t at = rng_() % 2;
  expect_bound(
      "width 0", [at](TrainState& s) { s.model_dims[at] = 0; },
      {"layer width " + std::to_string(at) + " (of", "is 0", "> 0"},
      [&](TrainState& s) {
        s.model_dims[at] = 1;
        resize(s);
      });
  expect_bound(
      "width -1", [](TrainState& s) { s.model_dims.back() = -1; }, {"is -1 (must be > 0)"},
      [&](TrainState& s) {
        s.model_dims.back() = 1;
        resize(s);
      });
  expect_bound(
      "width INT64_MIN", [](TrainState& s) { s.model_dims[0] = kI64Min; }, {"is " + std::to_string(kI64Min)},
      [&](TrainState& s) {
        s.model_dims[0] = 1;
        resize(s);
      });
  expect_bound(
      "widths overflow the count",
      [](TrainState& s) {
        s.model_dims = {kI64Max, kI64Max};
      },
      {"2^64"},
      [&](TrainState& s) {
        s.model_dims = {9, 9};
        resize(s);
      });
  expect_bound(
      "weights one short", [](TrainState& s) { s.master_weights_fp32.pop_back(); }, {"master weights hold"},
      [](TrainState&) {});
  expect_bound(
      "weights one over", [](TrainState& s) { s.master_weights_fp32.push_back(0.0f); }, {"master weights hold"},
      [](TrainState&) {});
  expect_bound(
      "momentum one short", [](TrainState& s) { s.momentum_fp32.pop_back(); }, {"momentum holds"}, [](TrainState&) {});
}

TEST_F(CheckpointValidation, NamesMustBeKnown) {
  expect_bound(
      "activation tanh", [](TrainState& s) { s.activation = "tanh"; },
      {"activation is 'tanh'", "relu, gelu or gelu-tanh"}, [](TrainState& s) { s.activation = "gelu"; });
  expect_bound(
      "activation empty", [](TrainState& s) { s.activation.clear(); }, {"activation is ''"},
      [](TrainState& s) { s.activation = "relu"; });
  expect_bound(
      "activation with a NUL", [](TrainState& s) { s.activation = std::string("relu\0", 5); }, {"activation is"},
      [](TrainState& s) { s.activation = "relu"; });
  expect_bound(
      "activation long", [](TrainState& s) { s.activation.assign(5000, 'x'); }, {"(5000 bytes)"},
      [](TrainState& s) { s.activation = "relu"; });
  expect_bound(
      "loss xentropy", [](TrainState& s) { s.loss = "xentropy"; }, {"loss is 'xentropy'", "xent or mse"},
      [](TrainState& s) { s.loss = "mse"; });
}

TEST_F(CheckpointValidation, NonFiniteWeightsAreNamedByFirstIndex) {
  const float values[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity()};
  const char* texts[] = {"nan", "inf", "-inf"};
  for (int buffer = 0; buffer < 2; ++buffer) {
    for (int v = 0; v < 3; ++v) {
      SCOPED_TRACE("DDP_TEST_SEED=" + std::to_string(seed_));
      TrainState s = valid_state(rng_);
      std::vector<float>& target = buffer == 0 ? s.master_weights_fp32 : s.momentum_fp32;
      const size_t n = target.size();
      const size_t first = rng_() % n;
      // A second bad value after it must not be the one named.
      if (first + 1 < n) target[first + 1 + rng_() % (n - first - 1)] = values[(v + 1) % 3];
      target[first] = values[v];
      const std::string want = std::string(buffer == 0 ? "master weight " : "momentum value ") + std::to_string(first) +
                               " (of " + std::to_string(n) + ") is " + texts[v];
      EXPECT_TRUE(contains(problem_of(s), want)) << "want '" << want << "' in: " << problem_of(s);
    }
  }
  // Finite extremes are weights like any other.
  TrainState s = valid_state(rng_);
  s.master_weights_fp32.front() = std::numeric_limits<float>::max();
  s.master_weights_fp32.back() = -std::numeric_limits<float>::denorm_min();
  s.momentum_fp32.back() = -0.0f;
  EXPECT_EQ(problem_of(s), "");
}

// The scaler's bounds against the rule itself: a random sequence of clean
// and overflowing steps under random rule parameters never leaves them, so
// a state the trainer reaches is never refused. Hysteresis 1 makes a second
// overflow in a row drive hysteresis_left below 0 (checked to occur).
TEST_F(CheckpointValidation, EveryStateTheScalerRuleReachesPasses) {
  SCOPED_TRACE("DDP_TEST_SEED=" + std::to_string(seed_));
  bool saw_negative_hysteresis = false;
  for (int run = 0; run < 20; ++run) {
    LossScalerConfig config;
    config.hysteresis = uniform(rng_, 1, 3);
    config.growth_interval = uniform(rng_, 1, 5);
    config.backoff_factor = run % 4 == 0 ? 1.0 : 0.5;
    if (run % 5 == 0) config.mode = LossScaleMode::Static;
    LossScaler scaler(config);
    TrainState s = valid_state(rng_);
    s.step = s.epoch = s.epoch_sample_offset = s.skipped_steps = 0;
    s.momentum_initialized = false;
    const int overflow_percent = static_cast<int>(uniform(rng_, 10, 90));
    for (int step = 0; step < 300; ++step) {
      const bool overflow = uniform(rng_, 0, 99) < overflow_percent;
      scaler.update(overflow);
      ++s.step;
      if (overflow)
        ++s.skipped_steps;
      else
        s.momentum_initialized = true;
      s.scaler = scaler.state();
      saw_negative_hysteresis |= s.scaler.hysteresis_left < 0;
      const std::string problem = problem_of(s);
      ASSERT_EQ(problem, "") << "run " << run << " step " << s.step;
    }
  }
  EXPECT_TRUE(saw_negative_hysteresis);
}

}  // namespace
}  // namespace ddp

// Format 2's fields: the model kind, the optimizer, its buffers and count.
namespace ddp {
namespace {

TEST_F(CheckpointValidation, OptimizerStateBounds) {
  expect_bound(
      "model kind", [](TrainState& s) { s.model_kind = "resnet"; }, {"model is 'resnet'", "mlp or gpt"},
      [](TrainState& s) { s.model_kind = "mlp"; });
  expect_bound(
      "optimizer lion", [](TrainState& s) { s.optimizer = "lion"; }, {"optimizer is 'lion'", "sgd or adamw"},
      [](TrainState& s) { s.optimizer = "sgd"; });
  auto adamw = [](TrainState& s) {
    s.optimizer = "adamw";
    s.second_moment_fp32.assign(s.master_weights_fp32.size(), 0.25f);
  };
  expect_bound(
      "adamw without exp_avg_sq", [](TrainState& s) { s.optimizer = "adamw"; },
      {"exp_avg_sq holds 0 values", "adamw keeps"}, adamw);
  expect_bound(
      "sgd with exp_avg_sq", [](TrainState& s) { s.second_moment_fp32.assign(3, 0.0f); },
      {"exp_avg_sq holds 3 values", "sgd keeps 0"}, [](TrainState&) {});
  expect_bound(
      "exp_avg_sq one short",
      [&](TrainState& s) {
        adamw(s);
        s.second_moment_fp32.pop_back();
      },
      {"exp_avg_sq holds"}, adamw);
  expect_bound(
      "negative exp_avg_sq",
      [&](TrainState& s) {
        adamw(s);
        s.second_moment_fp32.back() = -1e-30f;
      },
      {"exp_avg_sq value", "must be >= 0"},
      [&](TrainState& s) {
        adamw(s);
        s.second_moment_fp32.back() = 0.0f;
      });
  expect_bound(
      "NaN exp_avg_sq",
      [&](TrainState& s) {
        adamw(s);
        s.second_moment_fp32[0] = NAN;
      },
      {"exp_avg_sq value 0", "nan"}, adamw);
  expect_bound(
      "tensors that are not the layout",
      [](TrainState& s) {
        s.tensors = {{"0.weight", {1, 1}}};
      },
      {"its tensors hold 1 values"}, [](TrainState& s) { s.tensors.clear(); });
}

TEST_F(CheckpointValidation, OptimizerStepsAreTheCleanSteps) {
  SCOPED_TRACE("DDP_TEST_SEED=" + std::to_string(seed_));
  TrainState s = valid_state(rng_);
  EXPECT_EQ(problem_of(s, true), "");
  for (int64_t off : {int64_t{-1}, int64_t{1}, -s.optimizer_steps - 1}) {
    TrainState bad = s;
    bad.optimizer_steps += off;
    EXPECT_TRUE(contains(problem_of(bad, true), "optimizer_steps is " + std::to_string(bad.optimizer_steps)))
        << problem_of(bad, true);
  }
}

}  // namespace
}  // namespace ddp
