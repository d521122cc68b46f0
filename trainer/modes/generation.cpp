// generation.cpp
#include "trainer/modes/generation.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>

#include "kernels/buffer.h"
#include "kernels/error.h"
#include "kernels/lowp_convert.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/checkpoint_dir.h"
#include "trainer/checkpoint/checkpoint_validation.h"
#include "trainer/modes/inference.h"
#include "trainer/config/model_catalog.h"
#include "trainer/config/model_factory.h"
#include "trainer/config/model_table.h"
#include "trainer/params/parameter_store.h"
#include "trainer/modes/token_sampler.h"
#include "trainer/checkpoint/hf_gpt2.h"
#include "trainer/checkpoint/weights_io.h"
#include "trainer/config/run_inputs.h"
#include "trainer/io/npy_io.h"
#include "trainer/data/text_data.h"
#include "trainer/tokenizer/tokenizer_kind.h"

namespace ddp {
namespace {

constexpr int kByteVocab = 256;

bool given(const TrainConfig& c, const char* flag) { return c.given_flags.count(flag) > 0; }

// The checkpoint's shape into the model's settings; each shape flag given
// must agree (the shape is the checkpoint's: a flag that differs is a mistake).
// Returns the checkpoint's tokenizer ("" where it records none).
std::string bind_to_checkpoint(TrainConfig& c, const std::string& path) {
  const ModelRow& row = model_row(c.model);
  DDP_REQUIRE(row.token_shape && row.from_dims, "--generate: the model's row has no token shape or from_dims");
  const TrainState s = read_checkpoint(path);
  validate_checkpoint_contents(s, path);
  check_checkpoint_model_kind(s, row.kind.name, path);
  const std::vector<int64_t>& d = s.model_dims;
  uint64_t count = 0;
  const std::string problem = row.kind.dims_problem(d, count);
  if (!problem.empty()) throw CheckpointError(path, problem);
  // The shape the flags give: the model's own, and the data flags' window and vocabulary.
  TrainConfig flags = c;
  TokenShape from_data_flags = row.token_shape(flags);
  from_data_flags.context = static_cast<int>(c.data.block_size);
  from_data_flags.vocab_size = static_cast<int>(c.data.vocab_size);
  row.set_token_shape(flags, from_data_flags);
  const std::vector<int64_t> flag_dims = row.dims(flags);
  for (size_t i = 0; i < row.dim_flags.size(); ++i) {
    const DimFlag& f = row.dim_flags[i];
    if (given(c, f.flag.c_str()) && flag_dims[i] != d[i])
      throw Error("--" + f.flag + " " + std::to_string(flag_dims[i]) + " disagrees with the checkpoint " + path + " (" +
                  std::to_string(d[i]) + " " + f.what + "): the shape comes from the checkpoint, drop the flag");
  }
  row.from_dims(c, d);
  c.resume_path = path;  // load_starting_weights reads this same file
  return s.tokenizer;
}

}  // namespace

GenerationPlan plan_generation(const TrainConfig& config) {
  GenerationPlan plan;
  TrainConfig& c = plan.config;
  c = config;
  std::string recorded;
  if (c.init_weights_dir.empty()) {
    std::string path = c.resume_path;
    if (path.empty()) {
      path = find_newest_valid_checkpoint(c.checkpoint_dir).newest_valid;
      if (path.empty()) throw Error("--generate: no valid checkpoint in " + c.checkpoint_dir);
    }
    recorded = bind_to_checkpoint(c, path);
    plan.source = "checkpoint " + path;
  } else {
    // The vocabulary as --data text binds one: the tokenizer's (the weights'
    // record, else --tokenizer, else bytes) padded to a multiple of 128;
    // --vocab-size pads it otherwise or narrows it.
    recorded = weights_tokenizer(c.init_weights_dir);
    const std::string named = !recorded.empty() ? recorded : config.tokenizer;
    int ids = tokenizer_vocab_size(named) > 0 ? tokenizer_vocab_size(named) : kByteVocab;
    // Hugging Face weights say their vocabulary (and their shape, bound as the flags were read).
    if (is_hf_gpt2_weights(c.init_weights_dir)) ids = read_hf_gpt2_config(c.init_weights_dir).vocab_size;
    const int vocab = c.data.vocab_size > 0 ? static_cast<int>(c.data.vocab_size)
                                            : (ids + kVocabPadMultiple - 1) / kVocabPadMultiple * kVocabPadMultiple;
    model_row(c.model).set_token_shape(c, TokenShape{static_cast<int>(c.data.block_size), vocab, std::min(vocab, ids)});
    plan.source = "weights " + c.init_weights_dir;
  }
  const TokenShape shape = model_token_shape(c);
  c.tokenizer = sampling_tokenizer(recorded, config.tokenizer, shape.real_vocab, plan.source, "--generate");
  plan.codec = TextCodec(c.tokenizer, c.gpt2_ranks_path);
  plan.prompt_ids = plan.codec.encode(c.prompt, "--prompt");
  check_sampling(shape, plan.prompt_ids, c.top_k, "--generate");
  if (!c.generate_logits_path.empty()) {
    const std::string note =
        check_npy_output_path(c.generate_logits_path, "--generate-logits", run_input_paths(c), c.overwrite);
    if (!note.empty()) std::fprintf(stderr, "%s\n", note.c_str());
  }
  plan.weights_fp32 = load_starting_weights(c, model_parameters(c), "--generate");
  return plan;
}

void run_generation(const GenerationPlan& plan, Backend& backend, std::FILE* out, std::FILE* status) {
  const TrainConfig& c = plan.config;
  std::fprintf(status,
               "generate: %lld tokens (%s) after a %zu-token prompt, temperature %g%s, top-k %s, seed %llu; %s from "
               "%s\n",
               static_cast<long long>(c.generate_tokens), c.tokenizer.c_str(), plan.prompt_ids.size(), c.temperature,
               c.temperature == 0 ? " (greedy)" : "", c.top_k > 0 ? std::to_string(c.top_k).c_str() : "off",
               static_cast<unsigned long long>(c.seed), model_summary(c).c_str(), plan.source.c_str());
  std::fflush(status);
  std::unique_ptr<Model> model = make_model(c, backend, 1);
  ParameterStore params(backend, model->parameters());
  params.set_master_weights(plan.weights_fp32);
  const SamplingSettings settings{c.temperature, c.top_k};
  const WeightTable weights_lowp = WeightTable::flat(params.weights_lowp.data(), model->parameters());
  const TokenShape shape = model_token_shape(c);
  std::vector<float> logits_fp32;  // [N, real_vocab], kept only for --generate-logits
  std::function<void(const std::vector<float>&)> keep_logits = nullptr;
  if (!c.generate_logits_path.empty())
    keep_logits = [&logits_fp32](const std::vector<float>& l) {
      logits_fp32.insert(logits_fp32.end(), l.begin(), l.end());
    };
  const auto write = [out, &plan](int id) {
    const std::string bytes = plan.codec.token_bytes(id);
    // A full disk or a closed pipe is one line, not a text lost in silence.
    if (std::fwrite(bytes.data(), 1, bytes.size(), out) != bytes.size() || std::fflush(out) != 0)
      throw Error(std::string("--generate: cannot write the text to stdout: ") + std::strerror(errno));
  };
  const auto start = std::chrono::steady_clock::now();
  // The GPT is the next-token model with a decoder; another (a test's) runs whole windows.
  if (c.kv_cache && c.model == "gpt") {
    GptDecoder decoder(backend, c.gpt, weights_lowp);
    sample_tokens_cached(decoder, plan.prompt_ids, c.generate_tokens, settings, c.seed, write, keep_logits);
  } else {
    sample_tokens(backend, *model, shape, weights_lowp, plan.prompt_ids, c.generate_tokens, settings, c.seed, write,
                  keep_logits);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(status, "\ngenerate: %lld tokens in %.3f s (%.1f tokens/s, KV cache %s)\n",
               static_cast<long long>(c.generate_tokens), seconds, static_cast<double>(c.generate_tokens) / seconds,
               c.kv_cache ? "on" : "off");
  if (!c.generate_logits_path.empty())
    save_npy_fp32(c.generate_logits_path, logits_fp32.data(),
                  {static_cast<size_t>(c.generate_tokens), static_cast<size_t>(shape.real_vocab)});
}

std::string sampling_tokenizer(const std::string& recorded, const std::string& flag, int real_vocab,
                               const std::string& source, const std::string& mode) {
  if (!flag.empty()) check_tokenizer_name(flag, "--tokenizer");
  if (!recorded.empty() && !flag.empty() && recorded != flag)
    throw Error("--tokenizer " + flag + " disagrees with the " + source + ", whose model's tokenizer is " + recorded +
                ": drop the flag");
  std::string name = !recorded.empty() ? recorded : flag;
  if (name.empty()) {
    if (real_vocab > kByteVocab)
      throw Error(mode + ": the " + source + " records no tokenizer and its model has " + std::to_string(real_vocab) +
                  " classes: give --tokenizer " + kGpt2Tokenizer + " if it learnt GPT-2's tokens");
    name = kBytesTokenizer;
  }
  check_tokenizer_name(name, source);
  const std::string problem = tokenizer_vocab_problem(name, real_vocab);
  if (!problem.empty()) throw Error(mode + ": " + problem + " (" + source + ")");
  return name;
}

void check_sampling(const TokenShape& g, const std::vector<int32_t>& prompt_ids, int64_t top_k,
                    const std::string& mode) {
  DDP_REQUIRE(!prompt_ids.empty(), "check_sampling: a prompt of at least one token");
  const int64_t prompt_tokens = static_cast<int64_t>(prompt_ids.size());
  if (prompt_tokens > g.context)
    throw Error("--prompt is " + std::to_string(prompt_tokens) + " tokens, the model's context (block_size) is " +
                std::to_string(g.context) + ": give at most " + std::to_string(g.context) + " (" + mode + ")");
  for (size_t i = 0; i < prompt_ids.size(); ++i) {
    if (prompt_ids[i] >= g.real_vocab)
      throw Error("--prompt: token " + std::to_string(prompt_ids[i]) + " at position " + std::to_string(i) +
                  " is not in the model's vocabulary of " + std::to_string(g.real_vocab) + " (" + mode + ")");
  }
  if (top_k > g.real_vocab)
    throw Error("--top-k " + std::to_string(top_k) + " is above the model's vocabulary of " +
                std::to_string(g.real_vocab));
}

void sample_tokens(Backend& backend, Model& model, const TokenShape& g, const WeightTable& weights_lowp,
                   const std::vector<int32_t>& prompt_ids, int64_t count, const SamplingSettings& settings,
                   uint64_t seed, const std::function<void(int)>& emit,
                   const std::function<void(const std::vector<float>&)>& observe_logits) {
  DDP_REQUIRE(!prompt_ids.empty(), "sample_tokens: a prompt of at least one token");
  std::mt19937_64 rng(seed);
  const size_t t = static_cast<size_t>(g.context);
  std::vector<int32_t> text = prompt_ids;
  // The model reads whole windows of T positions. The last min(len, T)
  // tokens go at positions 0..n-1 and the rest is padded with id 0; the
  // logits at position n-1 are then exactly those of a run on those n tokens
  // alone: the causal mask gives position n-1 zero weight on every later
  // position, and LayerNorm, the MLP and the head work row by row. (Padding
  // on the left instead would shift the position embeddings.)
  std::vector<int32_t> window(t, 0);
  Buffer<int32_t> window_ids(backend, t);
  std::vector<lowp16> logits_lowp(static_cast<size_t>(g.vocab_size));
  std::vector<float> logits_fp32(static_cast<size_t>(g.real_vocab));
  for (int64_t i = 0; i < count; ++i) {
    const size_t n = std::min(text.size(), t);
    std::copy(text.end() - static_cast<std::ptrdiff_t>(n), text.end(), window.begin());
    std::fill(window.begin() + static_cast<std::ptrdiff_t>(n), window.end(), 0);
    backend.copy_to_device(window_ids.data(), window.data(), t * sizeof(int32_t));
    DeviceBatch batch;
    batch.token_ids = window_ids.data();
    batch.rows = 1;
    batch.labels_per_row = g.context;
    const ModelOutput logits = model.forward(batch, weights_lowp);
    backend.copy_to_host(logits_lowp.data(), logits.values + (n - 1) * static_cast<size_t>(logits.width),
                         logits_lowp.size() * sizeof(lowp16));
    lowp_to_float_array(backend.precision(), logits_lowp.data(), logits_fp32.data(),
                        logits_fp32.size());  // the real classes only
    if (observe_logits) observe_logits(logits_fp32);
    const int next = sample_token(logits_fp32, settings, rng);
    text.push_back(next);
    emit(next);
  }
}

void sample_tokens_cached(GptDecoder& decoder, const std::vector<int32_t>& prompt_ids, int64_t count,
                          const SamplingSettings& settings, uint64_t seed, const std::function<void(int)>& emit,
                          const std::function<void(const std::vector<float>&)>& observe_logits) {
  DDP_REQUIRE(!prompt_ids.empty(), "sample_tokens_cached: a prompt of at least one token");
  std::mt19937_64 rng(seed);
  decoder.reset();
  const std::vector<float>* logits_fp32 = &decoder.append(prompt_ids);
  for (int64_t i = 0; i < count; ++i) {
    if (observe_logits) observe_logits(*logits_fp32);
    const int next = sample_token(*logits_fp32, settings, rng);
    emit(next);
    // The last token's logits are never used: no forward for it.
    if (i + 1 < count) logits_fp32 = &decoder.append(next);
  }
}

}  // namespace ddp
