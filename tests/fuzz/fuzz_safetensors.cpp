// fuzz_safetensors.cpp: libFuzzer harness of the safetensors reader
// (trainer/io/safetensors.h) and of --init-weights from such a file
// (weights_io.h). Every input goes to parse_safetensors; one that parses has
// every tensor widened to FP32, is re-encoded and must parse again to the
// same tensors (a file the reader accepts is one the writer can reproduce),
// and is loaded as the weights of a small MLP (names and shapes checked).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "fuzz_support.h"
#include "trainer/io/safetensors.h"
#include "trainer/checkpoint/weights_io.h"
#include "trainer/models/mlp/mlp_config.h"

using namespace ddp;
using namespace ddp::fuzz;

namespace {
void finding(const char* what) {
  std::fprintf(stderr, "FINDING: %s\n", what);
  std::abort();
}

void check_round_trip(const SafetensorsFile& f) {
  std::vector<SafetensorsTensorOut> out;
  for (const SafetensorsTensor& t : f.tensors)
    out.push_back(
        {t.name, t.dtype, t.shape, f.bytes.data() + f.buffer_start + t.begin_byte, t.end_byte - t.begin_byte});
  const SafetensorsFile again = parse_safetensors(encode_safetensors(out, f.metadata), "re-encoded");
  if (again.tensors.size() != f.tensors.size() || again.metadata != f.metadata) finding("re-encoded file differs");
  for (size_t i = 0; i < f.tensors.size(); ++i) {
    const SafetensorsTensor &a = f.tensors[i], &b = again.tensors[i];
    if (a.name != b.name || a.dtype != b.dtype || a.shape != b.shape ||
        a.end_byte - a.begin_byte != b.end_byte - b.begin_byte ||
        std::memcmp(f.bytes.data() + f.buffer_start + a.begin_byte,
                    again.bytes.data() + again.buffer_start + b.begin_byte, a.end_byte - a.begin_byte) != 0)
      finding("re-encoded tensor differs");
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static MemFile file("fuzz-safetensors");
  static const ParameterRegistry registry = mlp_parameters(std::vector<int64_t>{3, 2});  // 0.weight [2, 3], 0.bias [2]
  const Bytes bytes(data, data + size);
  expect_parser_error([&] {
    const SafetensorsFile f = parse_safetensors(bytes, "fuzz.safetensors");
    for (const SafetensorsTensor& t : f.tensors) f.values_fp32(t);
    check_round_trip(f);
  });
  file.write(bytes);
  expect_parser_error([&] { load_weights_safetensors(file.path(), registry); });
  return 0;
}
