// training_sampler.cpp
#include "trainer/modes/training_sampler.h"

#include <algorithm>
#include <cstdio>

#include "kernels/error.h"
#include "trainer/modes/generation.h"
#include "trainer/config/model_catalog.h"
#include "trainer/config/model_factory.h"
#include "trainer/config/model_table.h"
#include "trainer/tokenizer/tokenizer_kind.h"

namespace ddp {
namespace {

// nanoGPT's sample.py defaults; --temperature and --top-k replace them.
constexpr double kSampleTemperature = 0.8;
constexpr int64_t kSampleTopK = 40;

bool given(const TrainConfig& c, const char* flag) { return c.given_flags.count(flag) > 0; }

// --prompt, or where none is given a newline for bytes (a sample then starts
// as a new line of the text would) and "" for GPT-2, whose codec starts it
// as a new document (<|endoftext|>), as GPT-2's own samples start.
std::string prompt_of(const TrainConfig& c) {
  if (!c.prompt.empty() || c.tokenizer != kBytesTokenizer) return c.prompt;
  return "\n";
}

// The model's tokenizer, which its data named (bind_model_to_data).
TextCodec codec_of(const TrainConfig& c) {
  const TokenShape g = model_token_shape(c);
  return TextCodec(sampling_tokenizer(c.tokenizer, "", g.real_vocab, "data", "--sample-every"), c.gpt2_ranks_path);
}

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
    throw Error("--sample-every needs " + models + " (a language model)");
  }
  const TextCodec codec = codec_of(c);
  check_sampling(model_token_shape(c), codec.encode(prompt_of(c), "--prompt"), given(c, "top-k") ? c.top_k : 0,
                 "--sample-every");
}

TrainingSampler::TrainingSampler(const TrainConfig& c, Backend& backend)
    : backend_(backend),
      length_tokens_(c.sample_length),
      seed_(c.seed),
      kv_cache_(c.kv_cache && c.model == "gpt"),
      gpt_(c.gpt),
      codec_(codec_of(c)) {
  check(c);
  shape_ = model_token_shape(c);
  prompt_ids_ = codec_.encode(prompt_of(c), "--prompt");
  // The whole-window path's model, only where it is the path (--kv-cache off).
  if (!kv_cache_) model_ = make_model(c, backend, 1);
  settings_.temperature = given(c, "temperature") ? c.temperature : kSampleTemperature;
  // A vocabulary below 40 tokens keeps all of them.
  settings_.top_k = given(c, "top-k") ? c.top_k : std::min<int64_t>(kSampleTopK, shape_.real_vocab);
}

TrainingSampler::~TrainingSampler() = default;

std::string TrainingSampler::sample_line(const WeightTable& weights_lowp, int64_t step) {
  std::string text;
  const auto append = [this, &text](int id) { text += codec_.token_bytes(id); };
  const uint64_t seed = seed_ + static_cast<uint64_t>(step);
  if (kv_cache_) {
    // Built for these weights: its cache is of them (they change every step).
    GptDecoder decoder(backend_, gpt_, weights_lowp);
    sample_tokens_cached(decoder, prompt_ids_, length_tokens_, settings_, seed, append);
  } else {
    sample_tokens(backend_, *model_, shape_, weights_lowp, prompt_ids_, length_tokens_, settings_, seed, append);
  }
  return "sample (step " + std::to_string(step) + "): " + escaped_bytes(text);
}

}  // namespace ddp
