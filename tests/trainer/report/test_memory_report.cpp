// test_memory_report.cpp: the host memory a rank needs before its first
// step (memory_report.h), against the arithmetic written out here: 4 bytes
// per parameter of whole FP32 weights, plus, for CPU ranks, the ZeRO
// formula's state with ours (Psi x (2 + 2 + K + 5) / N by stage).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "support/test_support.h"
#include "trainer/report/memory_report.h"

namespace ddp {
namespace {

// Bytes per parameter a CPU rank holds, by stage, AdamW (K = 12, extras 5).
double cpu_bytes_per_parameter(int stage, int world) {
  const double n = world;
  switch (stage) {
    case 0:
      return 4 + 2 + 2 + 12 + 5;
    case 1:
      return 4 + 2 + 2 + (12 + 5) / n;
    case 2:
      return 4 + 2 + (2 + 12 + 5) / n;
    default:
      return 4 + (2 + 2 + 12 + 5) / n;
  }
}

TEST(MemoryReport, HostBytesNeededAreTheWholeWeightsAndTheRanksState) {
  std::mt19937_64 rng(test::test_seed());
  for (int i = 0; i < 50; ++i) {
    const int stage = static_cast<int>(rng() % 4), world = 1 + static_cast<int>(rng() % 64);
    const size_t parameters = 1 + rng() % 1000000000;
    const double psi = static_cast<double>(parameters);
    EXPECT_NEAR(host_bytes_needed(stage, world, parameters, true, true), cpu_bytes_per_parameter(stage, world) * psi,
                1e-9 * psi);
    // GPU ranks hold their state on the device: the host keeps the whole FP32 weights.
    EXPECT_DOUBLE_EQ(host_bytes_needed(stage, world, parameters, true, false), 4 * psi);
  }
}

TEST(MemoryReport, AModelAboveTheMachinesMemoryIsOneLineNamingItsSizeAndTheFix) {
  std::mt19937_64 rng(test::test_seed());
  const size_t parameters = 1000000 + rng() % 1000000;
  const auto needed = static_cast<size_t>(host_bytes_needed(0, 1, parameters, true, true));
  EXPECT_EQ(host_memory_problem(0, 1, 1, parameters, true, true, needed + 1), "");
  const std::string problem = host_memory_problem(0, 1, 1, parameters, true, true, needed - 1);
  for (const std::string& w :
       std::vector<std::string>{std::to_string(parameters) + " parameters", "host memory", "--n-layer", "--zero 3"})
    EXPECT_NE(problem.find(w), std::string::npos) << w << " not in: " << problem;
  EXPECT_EQ(problem.find('\n'), std::string::npos) << problem;
  // Already sharded as far as it goes: no --zero 3 advice.
  const auto needed3 = static_cast<size_t>(host_bytes_needed(3, 4, parameters, true, true));
  const std::string sharded = host_memory_problem(3, 4, 4, parameters, true, true, needed3 - 1);
  EXPECT_EQ(sharded.find("--zero 3"), std::string::npos) << sharded;
  EXPECT_EQ(sharded.find("--zero-shard-size"), std::string::npos) << sharded;
  // In hybrid groups of 4 of a world of 16, each group holds the state: shard over the world.
  const std::string hybrid = host_memory_problem(3, 4, 16, parameters, true, true, needed3 - 1);
  EXPECT_NE(hybrid.find("over all 16 ranks (--zero-shard-size 16)"), std::string::npos) << hybrid;
  EXPECT_EQ(hybrid.find("--zero 3"), std::string::npos) << hybrid;
}

}  // namespace
}  // namespace ddp
