// model_catalog.cpp: each function reads the configured model's row of the
// model table (model_table.h).
#include "trainer/config/model_catalog.h"

#include "kernels/error.h"
#include "trainer/config/model_table.h"
#include "trainer/data/data_source.h"
#include "trainer/tokenizer/tokenizer_kind.h"

namespace ddp {
namespace {
const ModelRow& row_of(const TrainConfig& c) { return model_row(c.model); }
}  // namespace

ParameterRegistry model_parameters(const TrainConfig& c) { return row_of(c).parameters(c); }
std::vector<int64_t> model_dims(const TrainConfig& c) { return row_of(c).dims(c); }
std::string model_activation_name(const TrainConfig& c) { return row_of(c).activation_name(c); }
std::string model_kind_name(const TrainConfig& c) { return row_of(c).kind.name; }
std::string model_summary(const TrainConfig& c) { return row_of(c).summary(c); }
std::string model_shape_text(const TrainConfig& c) { return row_of(c).shape_text(c); }
double model_flops_per_sample(const TrainConfig& c) { return row_of(c).flops_per_sample(c); }
int64_t model_tokens_per_sample(const TrainConfig& c) { return row_of(c).tokens_per_sample(c); }
int64_t model_input_width(const TrainConfig& c) { return row_of(c).input_width(c); }
int64_t model_output_width(const TrainConfig& c) { return row_of(c).output_width(c); }
bool model_reads_tokens(const TrainConfig& c) { return static_cast<bool>(row_of(c).token_shape); }

TokenShape model_token_shape(const TrainConfig& c) {
  const ModelRow& row = row_of(c);
  if (!row.token_shape) throw Error("--model " + c.model + " reads features, not tokens");
  return row.token_shape(c);
}

TrainConfig bind_model_to_data(TrainConfig c, const TrainTestData& data) {
  const ModelRow& row = row_of(c);
  c = row.bind_to_data(std::move(c), data);
  if (!data.train.is_token_data()) return c;
  const std::string& known = data.train.tokenizer;
  if (c.tokenizer.empty()) {
    c.tokenizer = known;
    return c;
  }
  check_tokenizer_name(c.tokenizer, "--tokenizer");
  if (!known.empty() && known != c.tokenizer)
    throw Error("--tokenizer " + c.tokenizer + " disagrees with the data: " + data.train.source + " holds " + known +
                " tokens");
  const int real_vocab = data.train.real_vocab_size > 0 ? data.train.real_vocab_size : data.train.vocab_size;
  const std::string problem = tokenizer_vocab_problem(c.tokenizer, real_vocab);
  if (!problem.empty()) throw Error("--tokenizer " + c.tokenizer + ": " + problem);
  return c;
}

void check_model_matches_data(const TrainConfig& c, const TrainTestData& data) { row_of(c).check_data(c, data); }

}  // namespace ddp
