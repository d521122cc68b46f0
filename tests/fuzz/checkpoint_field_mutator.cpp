// checkpoint_field_mutator.cpp: see checkpoint_field_mutator.h. Arithmetic on
// the decoded i64 fields wraps through uint64_t: the fields hold anything, and
// a signed overflow here would be UBSan's finding in the fuzzer, not in the
// code under test.
#include "checkpoint_field_mutator.h"

#include "trainer/models/mlp/mlp_config.h"
#include "trainer/checkpoint/model_kinds.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace ddp::fuzz {

namespace {

constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();

int64_t wrap_add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
int64_t wrap_sub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}

uint64_t below(MutatorRng& rng, uint64_t n) { return n == 0 ? 0 : rng() % n; }

// Parameters of an MLP with these widths, or UINT64_MAX when a width is not
// positive or the count overflows (mirrors the trainer's layout).
uint64_t parameter_count(const std::vector<int64_t>& widths) {
  uint64_t count = 0;
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    if (widths[i] <= 0 || widths[i + 1] <= 0) return UINT64_MAX;
    uint64_t layer = 0;
    if (__builtin_mul_overflow(static_cast<uint64_t>(widths[i]), static_cast<uint64_t>(widths[i + 1]), &layer) ||
        __builtin_add_overflow(layer, static_cast<uint64_t>(widths[i + 1]), &layer) ||
        __builtin_add_overflow(count, layer, &count)) {
      return UINT64_MAX;
    }
  }
  return widths.size() < 2 ? UINT64_MAX : count;
}

// Resizes both buffers to the shape's count when it is small, keeping the
// values there are and filling with small finite ones.
void fit_buffers(TrainState& s, MutatorRng& rng) {
  const uint64_t count = parameter_count(s.model_dims);
  if (count > kMaxMutatedParameters) return;
  for (std::vector<float>* b : {&s.master_weights_fp32, &s.momentum_fp32, &s.second_moment_fp32}) {
    if (b == &s.second_moment_fp32 && s.optimizer != "adamw") continue;
    const size_t old_size = b->size();
    b->resize(count);
    for (size_t i = old_size; i < count; ++i) (*b)[i] = static_cast<float>(below(rng, 2001)) / 1000.0f - 1.0f;
  }
  // Format 2 names the tensors of the layout: the MLP's for these widths.
  s.tensors.clear();
  uint64_t implied = 0;
  if (checkpoint_dims_problem(s.model_dims, implied).empty()) {
    const ParameterRegistry registry = mlp_parameters(s.model_dims);
    for (const ParameterTensor& t : registry.tensors()) s.tensors.push_back({t.name, t.shape});
  }
}

// A value on or next to a bound of an i64 field, or relative to `s`'s other
// fields (the bounds between them: skipped <= step, epoch <= step, ...).
int64_t interesting_i64(const TrainState& s, MutatorRng& rng) {
  const int64_t fixed[] = {0, 1, -1, 2, -2, kI64Min, kI64Max, kI64Min + 1, kI64Max - 1, 1 << 20, -(1 << 20)};
  const int64_t relative[] = {s.step,
                              wrap_add(s.step, 1),
                              wrap_add(s.step, -1),
                              s.epoch,
                              wrap_add(s.epoch, 1),
                              s.skipped_steps,
                              wrap_add(s.skipped_steps, 1),
                              wrap_sub(1, s.skipped_steps),
                              wrap_sub(0, s.skipped_steps),
                              wrap_sub(s.step, s.skipped_steps),
                              wrap_add(wrap_sub(s.step, s.skipped_steps), 1)};
  switch (below(rng, 3)) {
    case 0:
      return fixed[below(rng, sizeof fixed / sizeof fixed[0])];
    case 1:
      return relative[below(rng, sizeof relative / sizeof relative[0])];
    default:
      return static_cast<int64_t>(rng()) >> below(rng, 64);  // any magnitude, either sign
  }
}

double interesting_scale(MutatorRng& rng) {
  const double values[] = {std::numeric_limits<double>::quiet_NaN(),
                           -std::numeric_limits<double>::quiet_NaN(),
                           std::numeric_limits<double>::infinity(),
                           -std::numeric_limits<double>::infinity(),
                           0.0,
                           -0.0,
                           -1.0,
                           1.0,
                           65536.0,
                           std::numeric_limits<double>::denorm_min(),
                           -std::numeric_limits<double>::denorm_min(),
                           std::numeric_limits<double>::min(),
                           std::numeric_limits<double>::max(),
                           static_cast<double>(std::numeric_limits<float>::max()),
                           2.0 * static_cast<double>(std::numeric_limits<float>::max())};
  if (below(rng, 4) == 0) {
    const uint64_t bits = rng();
    double v;
    std::memcpy(&v, &bits, 8);
    return v;
  }
  return values[below(rng, sizeof values / sizeof values[0])];
}

float interesting_weight(MutatorRng& rng) {
  const float values[] = {std::numeric_limits<float>::quiet_NaN(),
                          -std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::max(),
                          -std::numeric_limits<float>::denorm_min(),
                          -0.0f};
  if (below(rng, 4) == 0) {
    const uint32_t bits = static_cast<uint32_t>(rng());
    float v;
    std::memcpy(&v, &bits, 4);
    return v;
  }
  return values[below(rng, sizeof values / sizeof values[0])];
}

std::string interesting_name(const TrainState& s, MutatorRng& rng) {
  const char* names[] = {"relu", "gelu", "xent", "mse", "", "tanh", "RELU", "relu "};
  switch (below(rng, 3)) {
    case 0:
      return s.activation;
    case 1:
      return s.loss;
    default:
      return names[below(rng, sizeof names / sizeof names[0])];
  }
}

void mutate_width(TrainState& s, MutatorRng& rng) {
  switch (below(rng, 3)) {
    case 0:
      if (!s.model_dims.empty()) s.model_dims.erase(s.model_dims.begin() + below(rng, s.model_dims.size()));
      break;
    case 1:
      s.model_dims.insert(s.model_dims.begin() + below(rng, s.model_dims.size() + 1),
                          static_cast<int64_t>(below(rng, 6)) + 1);
      break;
    default: {
      if (s.model_dims.empty()) break;
      int64_t& w = s.model_dims[below(rng, s.model_dims.size())];
      const int64_t values[] = {0, -1, 1, wrap_add(w, 1), wrap_add(w, -1), kI64Min, kI64Max, int64_t{1} << 31};
      w = values[below(rng, sizeof values / sizeof values[0])];
    }
  }
  // Usually the buffers follow the new shape (so the checks after the
  // shape's are reached); sometimes they keep the old length.
  if (below(rng, 4) != 0) fit_buffers(s, rng);
}

}  // namespace

void make_consistent(TrainState& s, MutatorRng& rng) {
  const uint64_t count = parameter_count(s.model_dims);
  if (count > kMaxMutatedParameters) s.model_dims = {static_cast<int64_t>(below(rng, 5)) + 1, 3};
  if (s.activation != "relu" && s.activation != "gelu") s.activation = below(rng, 2) ? "relu" : "gelu";
  if (s.loss != "xent" && s.loss != "mse") s.loss = below(rng, 2) ? "xent" : "mse";
  s.model_kind = "mlp";
  if (s.optimizer != "sgd" && s.optimizer != "adamw") s.optimizer = below(rng, 2) ? "sgd" : "adamw";
  if (s.optimizer == "sgd") s.second_moment_fp32.clear();
  fit_buffers(s, rng);
  for (std::vector<float>* b : {&s.master_weights_fp32, &s.momentum_fp32, &s.second_moment_fp32})
    for (float& v : *b)
      if (!std::isfinite(v)) v = 0.0f;
  for (float& v : s.second_moment_fp32) v = std::fabs(v);
  // A position: step in [0, 2^20), then the others within their bounds.
  s.step = static_cast<int64_t>(static_cast<uint64_t>(s.step) % (1 << 20));
  s.skipped_steps = static_cast<int64_t>(below(rng, static_cast<uint64_t>(s.step) + 1));
  s.epoch = static_cast<int64_t>(below(rng, static_cast<uint64_t>(s.step) + 1));
  s.epoch_sample_offset = s.epoch < s.step ? static_cast<int64_t>(below(rng, 1 << 16)) : 0;
  const int64_t clean = s.step - s.skipped_steps;
  s.momentum_initialized = clean > 0;
  if (!std::isfinite(s.scaler.scale) || s.scaler.scale <= 0.0) s.scaler.scale = 65536.0;
  s.scaler.growth_tracker = static_cast<int64_t>(below(rng, static_cast<uint64_t>(clean) + 1));
  s.scaler.hysteresis_left = 1 - s.skipped_steps + static_cast<int64_t>(below(rng, 4));
  s.optimizer_steps = clean;
}

void mutate_one_field(TrainState& s, MutatorRng& rng) {
  switch (below(rng, 16)) {
    case 0:
      s.step = interesting_i64(s, rng);
      break;
    case 1:
      s.epoch = interesting_i64(s, rng);
      break;
    case 2:
      s.epoch_sample_offset = interesting_i64(s, rng);
      break;
    case 3:
      s.skipped_steps = interesting_i64(s, rng);
      break;
    case 4:
      s.scaler.growth_tracker = interesting_i64(s, rng);
      break;
    case 5:
      s.scaler.hysteresis_left = interesting_i64(s, rng);
      break;
    case 6:
      s.scaler.scale = interesting_scale(rng);
      break;
    case 7:
      s.momentum_initialized = !s.momentum_initialized;
      break;
    case 8:
    case 9: {  // a single odd value at a random index of one buffer
      std::vector<float>& b = below(rng, 2) ? s.master_weights_fp32 : s.momentum_fp32;
      if (!b.empty()) b[below(rng, b.size())] = interesting_weight(rng);
      break;
    }
    case 10:
      mutate_width(s, rng);
      break;
    case 11:
      (below(rng, 2) ? s.activation : s.loss) = interesting_name(s, rng);
      break;
    case 12: {  // one value more or less in one buffer
      std::vector<float>& b = below(rng, 2) ? s.master_weights_fp32 : s.momentum_fp32;
      if (below(rng, 2) && !b.empty())
        b.pop_back();
      else
        b.push_back(0.5f);
      break;
    }
    case 13:
      s.optimizer_steps = interesting_i64(s, rng);
      break;
    case 14: {  // the other optimizer, its buffers kept or fitted
      s.optimizer = s.optimizer == "adamw" ? "sgd" : "adamw";
      if (below(rng, 2)) s.second_moment_fp32.assign(s.optimizer == "adamw" ? s.master_weights_fp32.size() : 0, 0.5f);
      break;
    }
    default:
      s.seed = rng();
      break;
  }
}

}  // namespace ddp::fuzz
