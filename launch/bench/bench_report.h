// bench_report.h: `ddp_train --bench` turns step timings into one JSON line:
// samples/s (and tokens/s for a GPT), step time percentiles, model TFLOP/s
// and MFU against the device's FP16 dense peak, and the all-reduce time per
// step.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trainer/loop/trainer.h"

namespace ddp {

// FP16 dense Tensor Core peak in TFLOP/s by GPU name (vendor datasheets,
// SXM parts), 0 when the name is not in the table.
double peak_fp16_tflops(const std::string& device_description);

struct BenchContext {
  std::string model;              // the model's shape, e.g. "784-512-10"
  double flops_per_sample = 0.0;  // of one training step (config/model_factory.h)
  int64_t tokens_per_sample = 0;  // a GPT's window length T (tokens_per_s); 0 for the MLP
  std::string device;             // the backend's description
  int world_size = 1;
  int64_t batch_per_rank = 0;
  int64_t grad_accum = 1;
  int64_t warmup_steps = 0;
  double peak_tflops = 0.0;  // user-given; 0: from the table, else unknown
};

std::string bench_json_line(const BenchContext& context, const BenchTimings& timings);

}  // namespace ddp
