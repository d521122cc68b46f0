// trace_window.cpp
#include "trainer/report/trace_window.h"

#include "kernels/error.h"

namespace ddp {
namespace {
bool parse_step(const std::string& text, int64_t* out) {
  if (text.empty() || text.size() > 18) return false;
  for (char c : text)
    if (c < '0' || c > '9') return false;
  *out = std::stoll(text);
  return true;
}
}  // namespace

TraceWindow parse_trace_window(const std::string& text) {
  const size_t colon = text.find(':');
  TraceWindow w;
  const bool ok = colon != std::string::npos && parse_step(text.substr(0, colon), &w.first) &&
                  parse_step(text.substr(colon + 1), &w.last) && w.first >= 1 && w.first <= w.last;
  if (!ok) throw Error("--trace-steps: '" + text + "' is not A:B with 1 <= A <= B (global steps, e.g. 2:21)");
  return w;
}

std::string trace_path_for_rank(const std::string& path, int rank) {
  const std::string tag = ".rank" + std::to_string(rank);
  const size_t slash = path.find_last_of('/');
  const size_t base = slash == std::string::npos ? 0 : slash + 1;  // the file name's first character
  const size_t dot = path.find_last_of('.');
  const bool has_ext = dot != std::string::npos && dot > base;  // not a leading dot (".hidden")
  return has_ext ? path.substr(0, dot) + tag + path.substr(dot) : path + tag;
}

}  // namespace ddp
