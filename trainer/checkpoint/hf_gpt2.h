// hf_gpt2.h: Hugging Face GPT-2 weights in and out (--init-weights DIR,
// --save-weights DIR --weights-format hf): what transformers'
// GPT2LMHeadModel.save_pretrained writes and from_pretrained reads, a
// directory of config.json and model.safetensors.
//
// Their tensors are our GPT's (gpt_config.h: nanoGPT's names are GPT-2's)
// with four differences, each undone on load and redone on save:
//  - the Conv1D weights (attn.c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj)
//    are stored [in, out], transposed against nn.Linear's [out, in];
//  - the names may lack the "transformer." prefix (a GPT2Model's save, as
//    the hub's gpt2 file has them), and the causal-mask buffers attn.bias and
//    attn.masked_bias may be there (older saves): dropped;
//  - lm_head.weight is tied to wte: absent, or equal to it (refused if not);
//  - the vocabulary is the tokenizer's (50257), ours padded for the GEMMs
//    (wte's extra rows zero on load, cut on save), and wpe has n_positions
//    rows, of which the model's context reads the first block_size.
// The shape comes from config.json; a setting we do not implement is
// refused naming it. Dropout (resid/embd/attn_pdrop) is a training-time
// choice: ddp_train has none, and says so rather than refusing every
// pretrained GPT-2 (all ship 0.1).
#pragma once

#include <string>
#include <vector>

#include "trainer/io/safetensors.h"
#include "trainer/params/parameter_registry.h"

namespace ddp {

struct HfGpt2Config {
  int n_layer = 0;
  int n_head = 0;  // 0: not known (a bare model.safetensors has no config)
  int n_embd = 0;
  int n_positions = 0;
  int vocab_size = 0;
  double dropout = 0;     // the largest of resid_pdrop, embd_pdrop, attn_pdrop (not applied)
  std::string tokenizer;  // "gpt2" for GPT-2's vocabulary, or our export's record; "" unknown
  std::string source;     // the file the shape came from, for messages
};

// Whether `path` holds Hugging Face GPT-2 weights: a directory with a
// config.json, or a .safetensors file whose c_attn weight is stored [C, 3C]
// (Conv1D) or that holds wte.weight without "transformer.".
bool is_hf_gpt2_weights(const std::string& path);

// The model file of `path`: DIR/model.safetensors, or the file itself.
std::string hf_gpt2_model_file(const std::string& path);

// The shape: config.json's for a directory (DataError naming the key for a
// missing or unsupported setting: a sharded or .bin-only save, another
// model_type, an activation other than GPT-2's tanh GELU, another
// layer_norm_epsilon, n_inner other than 4 n_embd, untied embeddings,
// cross-attention, scale_attn_by_inverse_layer_idx, unscaled attention);
// the tensors' for a bare file, n_head 0.
HfGpt2Config read_hf_gpt2_config(const std::string& path);

// DataError unless the weights' vocabulary is the model's `real_vocab` (a
// model's classes beyond it would start as zero rows, fewer would be cut).
void check_hf_gpt2_vocab(const std::string& path, int real_vocab);

// Every tensor of the GPT `registry` from the weights at `path`, into its
// flat layout: transposed, wte padded with zero rows, wpe cut to the
// registry's rows. DataError naming the tensor for one missing, extra, of
// another shape, non-finite, or an lm_head.weight that is not wte.
std::vector<float> load_hf_gpt2_weights(const std::string& path, const ParameterRegistry& registry);

// Writes DIR/config.json and DIR/model.safetensors (in `dtype`, which
// config.json's torch_dtype names; GPT2LMHeadModel's names, wte cut to
// `real_vocab` rows, n_positions the registry's wpe rows) from the flat
// weights of the GPT `registry` of n_head heads; `tokenizer` recorded in
// config.json ("ddp_train_tokenizer"). Each file atomically.
void save_hf_gpt2(const std::string& dir, const ParameterRegistry& registry, const std::vector<float>& flat, int n_head,
                  int real_vocab, const std::string& tokenizer, SafetensorsDtype dtype = SafetensorsDtype::F32);

// The two files save_hf_gpt2 writes in `dir`.
std::vector<std::string> hf_gpt2_output_files(const std::string& dir);

}  // namespace ddp
