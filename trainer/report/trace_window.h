// trace_window.h: what --trace and --trace-steps name, without the tracer
// (step_trace.h): the window of steps and each rank's file. Pure functions
// of their text, so the option parser (and the fuzz build) need neither a
// backend nor a communicator.
#pragma once

#include <cstdint>
#include <string>

namespace ddp {

// --trace-steps A:B: global steps A..B (1-based, as the log counts them).
struct TraceWindow {
  int64_t first = 1, last = 20;
  bool contains(int64_t step) const { return step >= first && step <= last; }
};
// "A:B" with 1 <= A <= B; throws ConfigError naming --trace-steps otherwise.
TraceWindow parse_trace_window(const std::string& text);
// FILE with ".rank<R>" before its extension (after the last '/'), or at its end.
std::string trace_path_for_rank(const std::string& path, int rank);

}  // namespace ddp
