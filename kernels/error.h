// error.h: the project's exception type. Library-specific check macros
// (cuda_check.h here, nccl_check.h / mpi_check.h in comm/) throw it with
// file:line, the call as written and the library's own message; main() adds
// rank and host when it catches one.
#pragma once

#include <stdexcept>
#include <string>

namespace ddp {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "file.cpp:42: cudaMalloc(&p, n) failed: out of memory"
inline std::string format_call_error(const char* file, int line, const char* call, const std::string& what) {
  return std::string(file) + ":" + std::to_string(line) + ": " + call + " failed: " + what;
}

}  // namespace ddp

#define DDP_REQUIRE(cond, msg)                                                                   \
  do {                                                                                           \
    if (!(cond)) throw ::ddp::Error(::ddp::format_call_error(__FILE__, __LINE__, #cond, (msg))); \
  } while (0)
