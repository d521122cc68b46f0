// test_support.h: random inputs, poisoning and tolerances shared by the suites.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/half.h"

namespace ddp::test {

// A fresh seed per run (printed on failure through SCOPED_TRACE by callers),
// overridable with DDP_TEST_SEED to reproduce a failure.
uint64_t test_seed();
// "seed N (set DDP_TEST_SEED to reproduce)", for a failure's message.
std::string seed_text();

// Uniform random halves in [lo, hi], already rounded to FP16.
std::vector<lowp16> random_halves(std::mt19937_64& rng, size_t count, float lo = -1.0f, float hi = 1.0f);
std::vector<float> random_floats(std::mt19937_64& rng, size_t count, float lo = -1.0f, float hi = 1.0f);
std::vector<int32_t> random_labels(std::mt19937_64& rng, size_t count, int classes);

// Poison: a recognisable non-finite bit pattern written before a kernel runs
// so an output element the kernel forgot to write fails the comparison.
constexpr uint16_t kPoisonHalfBits = 0xffff;  // a NaN in FP16 and in BF16
std::vector<lowp16> poison_halves(size_t count);

std::vector<float> to_floats(const std::vector<lowp16>& h);
std::vector<double> to_doubles(const std::vector<lowp16>& h);

// Tolerances, stated once. An FP16 result of an FP32 computation is within
// half an ulp of FP16 (2^-11 relative) of the exact value plus the FP32
// accumulation error; we allow 2 FP16 ulps relative plus an absolute floor
// for results near zero whose FP32 sum cancelled.
constexpr double kFp16RelTol = 2.0 / 2048.0;
// FP32 results of FP32 arithmetic on O(1) values.
constexpr double kFp32RelTol = 1e-5;

// |got - want| <= rel * |want| + abs_floor, NaN never passes.
bool close_enough(double got, double want, double rel, double abs_floor);

// Relative L2 distance of two runs' parameter updates from a common start:
// ||a - b|| / ||b - start||. How far apart two trainings ended, on the scale
// of how far they moved.
double relative_update_difference(const std::vector<float>& a, const std::vector<float>& b,
                                  const std::vector<float>& start);

// Unique temporary directory for one test (removed by the caller if wanted).
std::string make_temp_dir(const std::string& tag);

// A whole file's bytes as a string ("" when it cannot be read).
std::string read_text(const std::string& path);

// A CSV classification set: `rows` samples of 4 features in [-1, 1) from
// `rng`, labels 0..2, with a header line.
void write_random_csv(const std::string& path, int rows, std::mt19937_64& rng);

// A shell command's exit status and its stdout+stderr (the command should
// redirect 2>&1 itself). exit_code is -1 when it did not exit normally.
struct CommandResult {
  int exit_code = -1;
  std::string output;
};
CommandResult run_command(const std::string& command);

// The one line of `output` that starts with "ddp_train: error", or "" when
// there is none or more than one (a refusal must be exactly one line).
std::string single_error_line(const std::string& output);

// A float's IEEE bits, for bitwise comparisons.
uint32_t bits_of(float f);

}  // namespace ddp::test
