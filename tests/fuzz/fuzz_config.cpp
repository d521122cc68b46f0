// fuzz_config.cpp: libFuzzer harness of the --config INI file
// (launch/options.h). parse_options reads the file from a path only, so the
// input is written to an in-memory file and passed as
// `ddp_train --config /proc/self/fd/N`: the INI syntax, every option's value
// conversion (Boost.Program_options) and every validation rule after it.
#include <cstddef>
#include <cstdint>

#include "fuzz_support.h"
#include "launch/cli/options.h"

using namespace ddp;
using namespace ddp::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static MemFile config("fuzz-config");
  config.write(data, size);
  const char* argv[] = {"ddp_train", "--config", config.path().c_str(), nullptr};
  expect_parser_error([&] { parse_options(3, argv); });
  return 0;
}
