// test_bench_report.cpp: the figures `ddp_train --bench` prints, from known
// timings: FLOP count, percentiles, samples/s, MFU, and the JSON keys a
// comparison script reads.
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <string>

#include "launch/bench/bench_report.h"
#include "support/test_support.h"
#include "trainer/models/mlp/mlp_config.h"
#include "trainer/io/json_writer.h"

namespace ddp {
namespace {

// A number field of the bench's JSON line (-1 when it is absent).
double json_field(const std::string& line, const std::string& key) {
  const size_t at = line.find("\"" + key + "\":");
  return at == std::string::npos ? -1.0 : std::strtod(line.c_str() + at + key.size() + 3, nullptr);
}

TEST(BenchReport, ModelFlopsLeaveOutTheFirstLayersInputGradient) {
  // 784-1024-10: forward 2*(784*1024 + 1024*10), backward 4*(...) less 2*784*1024.
  const double want = 6.0 * (784 * 1024 + 1024 * 10) - 2.0 * 784 * 1024;
  EXPECT_DOUBLE_EQ(mlp_flops_per_sample({784, 1024, 10}), want);
  EXPECT_DOUBLE_EQ(mlp_flops_per_sample({10, 10}), 4.0 * 100);
}

TEST(BenchReport, PeakByGpuName) {
  EXPECT_EQ(peak_fp16_tflops("CUDA device 0: NVIDIA H200 (132 SMs)"), 989.0);
  EXPECT_EQ(peak_fp16_tflops("NVIDIA H100 80GB HBM3"), 989.0);
  EXPECT_EQ(peak_fp16_tflops("CPU (OpenBLAS, 2 threads)"), 0.0);
}

TEST(BenchReport, JsonLineFromKnownTimings) {
  BenchContext c;
  c.model = "100-200-10";
  c.flops_per_sample = mlp_flops_per_sample({100, 200, 10});
  c.device = "NVIDIA H200";
  c.world_size = 2;
  c.batch_per_rank = 50;
  c.warmup_steps = 3;
  BenchTimings t;
  t.global_samples_per_step = 100;
  // 10 steps of 1..10 ms: 55 ms in all, median (nearest rank) 5 ms, p10 1 ms, p90 9 ms.
  for (int i = 1; i <= 10; ++i) t.step_s.push_back(i * 1e-3);
  t.allreduce.busy_s = 0.020;
  t.allreduce.exposed_s = 0.005;  // 75% hidden
  const std::string line = bench_json_line(c, t);
  const double samples_per_s = 1000.0 / 0.055;
  const double tflops = samples_per_s * c.flops_per_sample / 1e12;
  auto has = [&](const std::string& text) { return line.find(text) != std::string::npos; };
  EXPECT_TRUE(has("\"event\":\"bench\"")) << line;
  EXPECT_TRUE(has("\"model\":\"100-200-10\"")) << line;
  EXPECT_TRUE(has("\"samples_per_s\":" + json_number(samples_per_s))) << line;
  EXPECT_TRUE(has("\"step_ms_median\":5,") && has("\"step_ms_p10\":1,") && has("\"step_ms_p90\":9")) << line;
  EXPECT_TRUE(has("\"model_tflops\":" + json_number(tflops))) << line;
  EXPECT_TRUE(has("\"mfu\":" + json_number(tflops / 989.0))) << line;
  EXPECT_TRUE(has("\"allreduce_ms_per_step\":2,")) << line;
  EXPECT_TRUE(has("\"allreduce_exposed_ms_per_step\":0.5,")) << line;
  EXPECT_TRUE(has("\"allreduce_hidden_fraction\":0.75")) << line;
  // A comparison script looks for the one key that mentions samples.
  size_t count = 0;
  for (size_t at = line.find("samples"); at != std::string::npos; at = line.find("samples", at + 1)) ++count;
  EXPECT_EQ(count, 1u) << line;
}

// Hybrid sharding: 4 ranks in groups of 2 send per element a
// reduce-scatter in the group (1/2), an all-reduce of the half they own
// across the 2 replicas (2 x 1/2 x 1/2) and an all-gather in the group
// (1/2, twice at stage 3): at stage 1 the 1.5 of one group of 4 (3/4 +
// 3/4), at stage 3 2 against 2.25; only the all-reduce's 0.5 crosses the
// groups.
TEST(BenchReport, ShardGroupsCountTheirRingsAndSayWhatCrossesThem) {
  std::mt19937_64 rng(test::test_seed());
  const double psi = static_cast<double>(std::uniform_int_distribution<size_t>(1000, 100000)(rng));
  BenchContext c;
  c.model = "4-4";
  c.world_size = 4;
  for (int stage : {1, 3}) {
    const double gathers = stage == 3 ? 2.0 : 1.0;
    for (int groups : {2, 4}) {
      BenchTimings t;
      t.global_samples_per_step = 8;
      t.step_s = {1e-3};
      t.zero_stage = stage;
      t.zero_shard_size = groups;
      t.parameters = static_cast<size_t>(psi);
      t.reduce_scatter_elements_per_step = psi;
      t.allgather_elements_per_step = gathers * psi;
      const std::string line = bench_json_line(c, t);
      const double per_element = groups == 4 ? 0.75 + gathers * 0.75 : 0.5 + 0.5 + gathers * 0.5;
      const double sent = 2.0 * per_element * psi;
      EXPECT_NEAR(json_field(line, "comm_bytes_per_step_per_rank"), sent, 1e-9 * sent) << line;
      EXPECT_NEAR(json_field(line, "comm_bytes_theory"), sent, 1e-9 * sent) << line;
      EXPECT_NEAR(json_field(line, "comm_bytes_across_groups_per_step_per_rank"), groups == 2 ? psi : 0.0, 1e-9 * sent)
          << line;
      EXPECT_EQ(json_field(line, "zero_shard_size"), groups) << line;
    }
  }
}

// --cuda-graph: replayed steps' all-reduces are not timed, so the line
// gives no all-reduce figure rather than a partial one.
TEST(BenchReport, ReplayedStepsLeaveTheAllreduceFiguresNull) {
  BenchContext c;
  c.model = "4-4";
  c.flops_per_sample = mlp_flops_per_sample({4, 4});
  c.device = "NVIDIA H200";
  BenchTimings t;
  t.global_samples_per_step = 8;
  t.step_s = {1e-3, 1e-3};
  t.allreduce.busy_s = 0.001;
  t.allreduce.exposed_s = 0.0005;
  t.graph_replays = 1;
  const std::string line = bench_json_line(c, t);
  for (const char* key : {"allreduce_ms_per_step", "allreduce_exposed_ms_per_step", "allreduce_hidden_fraction"})
    EXPECT_NE(line.find(std::string("\"") + key + "\":null"), std::string::npos) << key << ": " << line;
  EXPECT_NE(line.find("\"graph_replays\":1"), std::string::npos) << line;
  t.graph_replays = 0;
  EXPECT_NE(bench_json_line(c, t).find("\"allreduce_ms_per_step\":0.5,"), std::string::npos);
}

TEST(BenchReport, UnknownPeakIsNull) {
  BenchContext c;
  c.model = "4-4";
  c.flops_per_sample = mlp_flops_per_sample({4, 4});
  c.device = "CPU";
  BenchTimings t;
  t.global_samples_per_step = 8;
  t.step_s = {1e-3};
  const std::string line = bench_json_line(c, t);
  EXPECT_NE(line.find("\"mfu\":null"), std::string::npos) << line;
  c.peak_tflops = 2.0;
  EXPECT_NE(bench_json_line(c, t).find("\"peak_tflops\":2,"), std::string::npos);
}

}  // namespace
}  // namespace ddp
