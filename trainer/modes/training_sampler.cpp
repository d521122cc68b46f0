// training_sampler.cpp
#include "trainer/modes/training_sampler.h"

#include <algorithm>
#include <cstdio>

#include "kernels/error.h"
#include "trainer/modes/generation.h"
#include "trainer/config/model_catalog.h"
#include "trainer/config/model_factory.h"
#include "trainer/config/model_table.h"

namespace ddp {
namespace {

// nanoGPT's sample.py defaults; --temperature and --top-k replace them.
constexpr double kSampleTemperature = 0.8;
constexpr int64_t kSampleTopK = 40;

bool given(const TrainConfig& c, const char* flag) { return c.given_flags.count(flag) > 0; }

// --prompt, or a newline: a sample then starts as a new line of the text would.
std::string prompt_of(const TrainConfig& c) { return c.prompt.empty() ? std::string("\n") : c.prompt; }

}  // namespace

std::string escaped_bytes(const std::string& bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (const char ch : bytes) {
    const unsigned char b = static_cast<unsigned char>(ch);
    if (b == '\\')
      out += "\\\\";
    else if (b == '\n')
      out += "\\n";
    else if (b == '\t')
      out += "\\t";
    else if (b == '\r')
      out += "\\r";
    else if (b >= 0x20 && b < 0x7f)
      out += ch;
    else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", b);
      out += hex;
    }
  }
  return out;
}

void TrainingSampler::check(const TrainConfig& c) {
  if (!model_reads_tokens(c)) {
    std::string models;
    for (const std::string& name : next_token_model_names())
      models += (models.empty() ? "" : " or ") + ("--model " + name);
    throw Error("--sample-every needs " + models + " (a byte-level language model)");
  }
  check_byte_sampling(model_token_shape(c), prompt_of(c), given(c, "top-k") ? c.top_k : 0, "--sample-every");
}

TrainingSampler::TrainingSampler(const TrainConfig& c, Backend& backend)
    : backend_(backend), length_bytes_(c.sample_length), seed_(c.seed), prompt_(prompt_of(c)) {
  check(c);
  shape_ = model_token_shape(c);
  model_ = make_model(c, backend, 1);
  settings_.temperature = given(c, "temperature") ? c.temperature : kSampleTemperature;
  // A vocabulary below 40 bytes keeps all of them.
  settings_.top_k = given(c, "top-k") ? c.top_k : std::min<int64_t>(kSampleTopK, shape_.real_vocab);
}

TrainingSampler::~TrainingSampler() = default;

std::string TrainingSampler::sample_line(const WeightTable& weights_fp16, int64_t step) {
  std::string text;
  text.reserve(static_cast<size_t>(length_bytes_));
  sample_bytes(backend_, *model_, shape_, weights_fp16, prompt_, length_bytes_, settings_,
               seed_ + static_cast<uint64_t>(step), [&text](int byte) { text += static_cast<char>(byte); });
  return "sample (step " + std::to_string(step) + "): " + escaped_bytes(text);
}

}  // namespace ddp
