// dataset.h: an in-memory data set as every reader returns it (IDX, .npy,
// CSV, synthetic), and the check the trainer runs before using one.
// Two forms of input, never both:
//   features  - row-major FP32 features [count, D], with either integer class
//               labels [count] or FP32 regression targets [count, K];
//   token ids - int32 windows of T token ids [count, T] (a language model's
//               input), with one class label per position [count, T] (for
//               a GPT, the next token at each position).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ddp {

struct Dataset {
  size_t count = 0;      // samples N
  size_t features = 0;   // D; 0 for token data
  std::vector<float> x;  // [count, features]; IDX pixels scaled to [0, 1]; empty for token data
  // The token form: inputs are token ids instead of features.
  size_t tokens_per_sample = 0;    // T; 0 for feature data
  std::vector<int32_t> token_ids;  // [count, tokens_per_sample], each in [0, vocab_size)
  int vocab_size = 0;  // token data only: the model's vocabulary (rows of its embedding, logits per position)
  // Token data: the tokenizer's vocabulary, <= vocab_size. vocab_size may be
  // padded above it for the GEMMs (GPT-2's 50257 -> 50304, as llm.c does);
  // ids and labels are below real_vocab_size, and a loss over the logits
  // should exclude the padded classes [real_vocab_size, vocab_size) so they
  // never win. 0: the same as vocab_size (no padding).
  int real_vocab_size = 0;
  // Token data: the tokenizer its ids are of (tokenizer/tokenizer_kind.h), "" unknown.
  std::string tokenizer;
  // [count] for classification; [count, tokens_per_sample] for token data
  // (the target class of each position); empty for regression.
  std::vector<int32_t> labels;
  size_t target_dim = 0;       // K
  std::vector<float> targets;  // [count, target_dim] for regression, else empty
  int num_classes = 0;         // max label + 1 for classification, else 0
  std::string source;          // what it was loaded from, for logs
  // Where the labels came from, so a label the model cannot output is named
  // by file and sample (IDX, .npy) or line (CSV): the file, and for a text
  // file the line of sample 0 (0: samples are counted, not lines).
  std::string labels_file;
  size_t labels_first_line = 0;

  bool is_classification() const { return !labels.empty(); }
  bool is_token_data() const { return tokens_per_sample != 0 || !token_ids.empty(); }
  // Labels per sample: 1 for feature data, one per position for token data.
  size_t labels_per_sample() const { return is_token_data() ? tokens_per_sample : 1; }
};

// Throws DataError("<name>: ...") unless the shapes agree (x is count x
// features, exactly one of labels/targets is filled and sized to match), the
// data set is not empty, every label is in [0, num_classes) and every feature
// and target is finite. A non-finite value is reported by sample and column:
//   "<name>: non-finite value (nan) in sample 17, feature 3".
// Token data: token_ids and labels are count x tokens_per_sample, no
// features or targets, every id in [0, vocab_size) and every label in
// [0, num_classes), a bad one named by sample and position:
//   "<name>: bad token id 70 in sample 3, position 5: not below vocab_size 64".
void validate_dataset(const Dataset& data, const std::string& name);

// Where sample `i`'s label is (feature data), for a message: "train.csv:
// line 7, column 3" or "labels.idx: sample 5" (the source when no labels
// file is known).
std::string label_place(const Dataset& data, size_t i);

// The finiteness part alone, for a reader that wants to name the file a
// matrix came from: `values` is [rows, width]; `column_word` names a column
// in the message ("feature", "target").
void require_finite(const std::vector<float>& values, size_t width, const std::string& name, const char* column_word);

}  // namespace ddp
