// test_step_trace.cpp: --trace's pieces on one rank: the flags' parsing,
// the per-rank file name, and the tracer's window, nesting and file.
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "comm/communicator.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/error.h"
#include "support/temp_dir.h"
#include "support/test_support.h"
#include "trainer/report/step_trace.h"

namespace ddp {
namespace {

TEST(TraceWindow, ParsesAAndBAndRefusesTheRest) {
  const TraceWindow w = parse_trace_window("3:17");
  EXPECT_EQ(w.first, 3);
  EXPECT_EQ(w.last, 17);
  EXPECT_TRUE(w.contains(3) && w.contains(17));
  EXPECT_FALSE(w.contains(2) || w.contains(18));
  for (const char* bad : {"", "3", "0:4", "5:2", "a:4", "3:-1", "3:4:5", " 3:4", "99999999999999999999:1"})
    EXPECT_THROW(parse_trace_window(bad), Error) << bad;
}

TEST(TracePath, RankGoesBeforeTheExtension) {
  EXPECT_EQ(trace_path_for_rank("run.json", 3), "run.rank3.json");
  EXPECT_EQ(trace_path_for_rank("/tmp/a.b/run", 0), "/tmp/a.b/run.rank0");
  EXPECT_EQ(trace_path_for_rank("out/t.trace.json", 12), "out/t.trace.rank12.json");
  EXPECT_EQ(trace_path_for_rank(".hidden", 1), ".hidden.rank1");
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return nlohmann::json::parse(in);
}

// Steps 1..5 through a tracer of window 2:3: only 2 and 3 are in the file,
// written by finish() (not inside a later step), each holding its layers
// and spans.
TEST(StepTracer, TracesItsWindowOnlyAndNestsTheSpans) {
  CpuBackend cpu(1);
  SingleProcessCommunicator comm;
  const test::TempDir temp_dir("step_trace");
  const std::string& dir = temp_dir.path();
  TraceRunInfo info;
  info.device = "cpu";
  info.model = "mlp";
  info.layer_tensors = {{2, 3}, {0, 1}};
  info.buckets = {{0, 10, 1}, {10, 6, 0}};
  StepTracer tracer(dir + "/t.json", parse_trace_window("2:3"), cpu, comm, info);
  for (int step = 1; step <= 5; ++step) {
    tracer.begin_step(step);
    tracer.begin_span("upload");
    tracer.end_span();
    tracer.before_forward(0);
    tracer.before_forward(1);
    tracer.end_layers();
    tracer.before_backward(1);
    tracer.before_backward(0);
    tracer.end_layers();
    tracer.begin_span("comm_wait");
    tracer.begin_span("optimizer");
    tracer.end_span();
    tracer.end_step();
    tracer.before_forward(0);  // an evaluation's forward, between steps: not a layer of the step
    tracer.end_layers();
    if (step == 2) tracer.flush();
    EXPECT_FALSE(tracer.written()) << step;
    EXPECT_EQ(tracer.started(), step >= 2) << step;
  }
  tracer.finish();
  EXPECT_TRUE(tracer.written());
  const nlohmann::json doc = read_json(dir + "/t.rank0.json");
  EXPECT_EQ(doc["otherData"]["format"], "ddp_train trace 1");
  EXPECT_EQ(doc["otherData"]["steps_traced"], nlohmann::json::array({2, 3}));
  EXPECT_EQ(doc["otherData"]["buckets"][0]["ready_after_layer"], 1);
  EXPECT_EQ(doc["otherData"]["buckets"][1]["bytes"], 12);
  int counted = 0;
  for (int step = 2; step <= 3; ++step) {
    std::vector<std::string> names;
    double step_ts = -1, step_end = -1;
    for (const auto& e : doc["traceEvents"]) {
      if (e["ph"] != "X" || e["args"]["step"] != step) continue;
      if (e["cat"] == "step") {
        step_ts = e["ts"];
        step_end = e["ts"].get<double>() + e["dur"].get<double>();
      } else
        names.push_back(e["name"]);
    }
    EXPECT_EQ(names, (std::vector<std::string>{"upload", "forward layer 0", "forward layer 1", "backward layer 1",
                                               "backward layer 0", "wait for communication", "optimizer"}));
    for (const auto& e : doc["traceEvents"])
      if (e["ph"] == "X" && e["args"]["step"] == step) {
        EXPECT_GE(e["ts"].get<double>(), step_ts);
        EXPECT_LE(e["ts"].get<double>() + e["dur"].get<double>(), step_end + 1e-6);
        ++counted;
      }
  }
  EXPECT_EQ(counted, 2 * 8);
  for (const auto& e : doc["traceEvents"])
    if (e["ph"] == "X") {
      EXPECT_TRUE(e["args"]["step"] == 2 || e["args"]["step"] == 3) << e.dump();
    }
}

TEST(StepTracer, ARunEndingInsideTheWindowStillWritesAtFinish) {
  CpuBackend cpu(1);
  SingleProcessCommunicator comm;
  const test::TempDir temp_dir("step_trace_finish");
  const std::string& dir = temp_dir.path();
  StepTracer tracer(dir + "/t.json", parse_trace_window("1:100"), cpu, comm, TraceRunInfo{});
  tracer.begin_step(1);
  tracer.end_step();
  EXPECT_FALSE(tracer.written());
  tracer.finish();
  EXPECT_TRUE(tracer.written());
  EXPECT_EQ(read_json(dir + "/t.rank0.json")["otherData"]["steps_traced"], nlohmann::json::array({1, 1}));
}

}  // namespace
}  // namespace ddp
