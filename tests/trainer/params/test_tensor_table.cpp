// test_tensor_table.cpp: models reach their weights and gradients through
// per-tensor tables (trainer/params/tensor_table.h), read at each use after
// the layer hook, so ZeRO can move a tensor between hooks.
//
// On the CPU backend, for an MLP (GELU, three Linears) and a tiny GPT (two
// blocks, tied wte), against a run on flat tables over one flat buffer:
//   - every tensor in its own buffer (the flat buffers poisoned): the same
//     outputs and gradients, bit for bit, and the flat gradient buffer
//     untouched;
//   - ZeRO-3's pattern from the layer hooks: before each layer's forward
//     and backward, its tensors (Model::layer_tensors) are copied into fresh
//     buffers, their entries re-pointed, and every earlier copy poisoned: a
//     model that resolves a pointer before the hook, or reads a tensor its
//     layer does not declare, reads NaN;
//   - both with a second, accumulating backward (accumulate = true) on top.
// Bitwise, because nothing about the arithmetic may change: only where the
// operands live.
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kernels/buffer.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/error.h"
#include "kernels/half.h"
#include "support/test_support.h"
#include "trainer/models/gpt/gpt_model.h"
#include "trainer/models/mlp/mlp_model.h"
#include "trainer/params/tensor_table.h"

namespace ddp {
namespace {

using Tensors = std::vector<std::vector<lowp16>>;  // per registry tensor, host copies

// A model, its batch and its random inputs (features or tokens, the weights
// in the registry's flat layout, two loss gradients for the two backwards).
struct Case {
  std::unique_ptr<Model> model;
  Buffer<lowp16> features_lowp;
  Buffer<int32_t> token_ids;
  DeviceBatch batch;
  std::vector<lowp16> weights_flat;  // registry layout, padding zero
  std::vector<lowp16> dout_first, dout_second;
};

std::vector<lowp16> random_flat_weights(const ParameterRegistry& r, std::mt19937_64& rng) {
  std::vector<lowp16> flat(r.flat_count(), to_half(0.0f));
  for (const ParameterTensor& t : r.tensors()) {
    const std::vector<lowp16> values = test::random_halves(rng, t.count, -0.5f, 0.5f);
    std::copy(values.begin(), values.end(), flat.begin() + static_cast<std::ptrdiff_t>(t.offset));
  }
  return flat;
}

Case mlp_case(Backend& cpu, std::mt19937_64& rng) {
  const int rows = 5;
  MlpConfig mlp;
  mlp.layer_widths = {9, 12, 11, 4};
  mlp.activation = Activation::Gelu;
  mlp.activation_name = "gelu";
  Case c;
  c.model = std::make_unique<MlpModel>(cpu, mlp, rows);
  c.features_lowp = Buffer<lowp16>(cpu, rows * 9);
  c.features_lowp.upload(test::random_halves(rng, rows * 9, -2.0f, 2.0f));
  c.batch.features_lowp = c.features_lowp.data();
  c.batch.rows = rows;
  c.weights_flat = random_flat_weights(c.model->parameters(), rng);
  c.dout_first = test::random_halves(rng, rows * 4);
  c.dout_second = test::random_halves(rng, rows * 4);
  return c;
}

Case gpt_case(Backend& cpu, std::mt19937_64& rng) {
  const int rows = 2;
  GptConfig g;
  g.n_layer = 2;
  g.n_head = 2;
  g.n_embd = 16;
  g.block_size = 8;
  g.vocab_size = 32;
  g.real_vocab = 30;
  Case c;
  c.model = std::make_unique<GptModel>(cpu, g, rows);
  std::vector<int32_t> tokens(static_cast<size_t>(rows) * g.block_size);
  for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % g.real_vocab);
  c.token_ids = Buffer<int32_t>(cpu, tokens.size());
  c.token_ids.upload(tokens);
  c.batch.token_ids = c.token_ids.data();
  c.batch.rows = rows;
  c.batch.labels_per_row = g.block_size;
  c.weights_flat = random_flat_weights(c.model->parameters(), rng);
  const size_t outputs = tokens.size() * g.vocab_size;
  c.dout_first = test::random_halves(rng, outputs);
  c.dout_second = test::random_halves(rng, outputs);
  return c;
}

// What a forward and two backwards (write, then accumulate) produced,
// read through the tables as they stand after each pass (a hook may have
// moved a tensor).
struct Result {
  std::vector<lowp16> output;
  Tensors grads_written, grads_accumulated;
};

Tensors download_tensors(Backend& cpu, const GradTable& grads, const ParameterRegistry& r) {
  Tensors out(r.size());
  for (size_t t = 0; t < r.size(); ++t) {
    out[t].resize(r[t].count);
    cpu.copy_to_host(out[t].data(), grads.at(t), r[t].count * sizeof(lowp16));
  }
  return out;
}

Result run(Backend& cpu, const Case& c, const ParameterTables& tables) {
  Model& m = *c.model;
  Result res;
  const ModelOutput out = m.forward(c.batch, tables.weights_lowp);
  res.output.resize(static_cast<size_t>(out.rows) * out.width);
  EXPECT_EQ(res.output.size(), c.dout_first.size());
  cpu.copy_to_host(res.output.data(), out.values, res.output.size() * sizeof(lowp16));
  cpu.copy_to_device(m.output_grad(), c.dout_first.data(), c.dout_first.size() * sizeof(lowp16));
  m.backward(tables.weights_lowp, tables.grads_lowp, /*accumulate=*/false, nullptr);
  res.grads_written = download_tensors(cpu, tables.grads_lowp, m.parameters());
  cpu.copy_to_device(m.output_grad(), c.dout_second.data(), c.dout_second.size() * sizeof(lowp16));
  m.backward(tables.weights_lowp, tables.grads_lowp, /*accumulate=*/true, nullptr);
  res.grads_accumulated = download_tensors(cpu, tables.grads_lowp, m.parameters());
  return res;
}

// The reference: flat tables over one flat weight and one flat gradient buffer.
Result run_flat(Backend& cpu, const Case& c) {
  const ParameterRegistry& r = c.model->parameters();
  Buffer<lowp16> weights_lowp(cpu, r.flat_count()), grads_lowp(cpu, r.flat_count());
  weights_lowp.upload(c.weights_flat);
  grads_lowp.upload(test::poison_halves(r.flat_count()));
  return run(cpu, c, ParameterTables::flat(weights_lowp.data(), grads_lowp.data(), r));
}

void expect_bitwise(const std::vector<lowp16>& got, const std::vector<lowp16>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(got[i].bits, want[i].bits) << what << ", element " << i << ": " << half_to_float(got[i]) << " vs "
                                         << half_to_float(want[i]);
}

void expect_same_results(const Result& got, const Result& want, const ParameterRegistry& r) {
  expect_bitwise(got.output, want.output, "forward output");
  for (size_t t = 0; t < r.size(); ++t) {
    expect_bitwise(got.grads_written[t], want.grads_written[t], r[t].name + " gradient (written)");
    expect_bitwise(got.grads_accumulated[t], want.grads_accumulated[t], r[t].name + " gradient (accumulated)");
  }
  // The accumulating backward changed the gradients (so it is compared, not skipped).
  size_t changed = 0;
  for (size_t t = 0; t < r.size(); ++t)
    for (size_t i = 0; i < r[t].count; ++i)
      changed += want.grads_accumulated[t][i].bits != want.grads_written[t][i].bits;
  EXPECT_GT(changed, 0u) << "accumulate = true left every gradient as it was";
}

// Every tensor in a buffer of its own, copied from the flat weights; the
// flat buffers poisoned, and the flat gradients still poisoned after.
void check_separate_buffers(Backend& cpu, Case c) {
  const ParameterRegistry& r = c.model->parameters();
  const Result want = run_flat(cpu, c);

  Buffer<lowp16> weights_flat(cpu, r.flat_count()), grads_flat(cpu, r.flat_count());
  weights_flat.upload(test::poison_halves(r.flat_count()));
  grads_flat.upload(test::poison_halves(r.flat_count()));
  std::vector<Buffer<lowp16>> weight_buffers, grad_buffers;
  ParameterTables tables{WeightTable(r.size()), GradTable(r.size())};
  for (size_t t = 0; t < r.size(); ++t) {
    weight_buffers.emplace_back(cpu, r[t].count);
    weight_buffers.back().upload(c.weights_flat.data() + r[t].offset, r[t].count);
    grad_buffers.emplace_back(cpu, r[t].count);
    grad_buffers.back().upload(test::poison_halves(r[t].count));
    tables.weights_lowp.set(t, weight_buffers.back().data());
    tables.grads_lowp.set(t, grad_buffers.back().data());
  }
  const Result got = run(cpu, c, tables);
  expect_same_results(got, want, r);
  const std::vector<lowp16> flat_after = grads_flat.download();
  for (size_t i = 0; i < flat_after.size(); ++i)
    ASSERT_EQ(flat_after[i].bits, test::kPoisonHalfBits) << "the flat gradient buffer was written at " << i;
}

// ZeRO-3's gather and free, from the hooks. `home` holds every tensor's
// weights and is never pointed to; each hook gathers its layer's tensors
// into fresh buffers and poisons the previous gather, so only the running
// layer's declared tensors are readable. Gradients move too: into fresh
// buffers that carry what was there, the old ones poisoned.
class RepointingHooks {
 public:
  RepointingHooks(Backend& cpu, const Model& model, const std::vector<lowp16>& weights_flat, ParameterTables& tables)
      : cpu_(cpu), model_(model), tables_(tables) {
    const ParameterRegistry& r = model.parameters();
    for (size_t t = 0; t < r.size(); ++t) {
      home_.emplace_back(cpu, r[t].count);
      home_.back().upload(weights_flat.data() + r[t].offset, r[t].count);
    }
  }

  LayerHooks hooks() {
    return {[this](int layer) { gather(layer, false); }, [this](int layer) { gather(layer, true); }};
  }
  int calls() const { return calls_; }

 private:
  void gather(int layer, bool backward) {
    ++calls_;
    const ParameterRegistry& r = model_.parameters();
    for (Buffer<lowp16>* b : gathered_) b->upload(test::poison_halves(b->count()));  // "freed"
    gathered_.clear();
    for (size_t t : model_.layer_tensors(layer)) {
      const size_t bytes = r[t].count * sizeof(lowp16);
      Buffer<lowp16>& w = keep(r[t].count);
      cpu_.copy_on_device(w.data(), home_[t].data(), bytes);
      tables_.weights_lowp.set(t, w.data());
      gathered_.push_back(&w);
      if (!backward) continue;
      Buffer<lowp16>& g = keep(r[t].count);
      lowp16* previous = tables_.grads_lowp.at(t);
      cpu_.copy_on_device(g.data(), previous, bytes);
      cpu_.copy_to_device(previous, test::poison_halves(r[t].count).data(), bytes);
      tables_.grads_lowp.set(t, g.data());
    }
  }
  // Poisoned buffers stay allocated: a stale pointer reads NaN, never freed memory.
  Buffer<lowp16>& keep(size_t count) {
    all_.emplace_back(cpu_, count);
    return all_.back();
  }

  Backend& cpu_;
  const Model& model_;
  ParameterTables& tables_;
  std::vector<Buffer<lowp16>> home_;
  std::deque<Buffer<lowp16>> all_;  // a deque: references to its elements stay valid
  std::vector<Buffer<lowp16>*> gathered_;
  int calls_ = 0;
};

void check_repointing_hooks(Backend& cpu, Case c) {
  const ParameterRegistry& r = c.model->parameters();
  const Result want = run_flat(cpu, c);

  // The tables start on poison: everything a layer reads comes from its hook.
  Buffer<lowp16> weights_flat(cpu, r.flat_count()), grads_flat(cpu, r.flat_count());
  weights_flat.upload(test::poison_halves(r.flat_count()));
  grads_flat.upload(test::poison_halves(r.flat_count()));
  ParameterTables tables = ParameterTables::flat(weights_flat.data(), grads_flat.data(), r);
  RepointingHooks hooks(cpu, *c.model, c.weights_flat, tables);
  c.model->set_layer_hooks(hooks.hooks());
  const Result got = run(cpu, c, tables);
  c.model->set_layer_hooks({});
  EXPECT_EQ(hooks.calls(), 3 * c.model->layer_count()) << "a forward and two backwards, one call per layer each";
  expect_same_results(got, want, r);
}

TEST(TensorTable, FlatPointsAtEachTensorsOffsetAndChecksItsEntries) {
  ParameterRegistry r;
  register_linear_parameters(r, "a", 3, 5, 0);
  register_linear_parameters(r, "b", 5, 2, 2);
  std::vector<lowp16> storage(r.flat_count());
  const GradTable flat = GradTable::flat(storage.data(), r);
  ASSERT_EQ(flat.size(), r.size());
  for (size_t t = 0; t < r.size(); ++t) EXPECT_EQ(flat.at(t), storage.data() + r[t].offset) << r[t].name;
  EXPECT_THROW(flat.at(r.size()), Error);
  WeightTable table(r.size());
  EXPECT_THROW(table.at(1), Error);  // never set
  const lowp16 one = to_half(1.0f);
  table.set(1, &one);
  EXPECT_EQ(table.at(1), &one);
  EXPECT_THROW(table.set(r.size(), &one), Error);
}

// Every tensor belongs to at least one layer, each layer's list is in
// registry order and in range; the GPT's tied wte is read by layer 0 (the
// embedding) and the last (the head); an MLP layer is its Linear's two.
TEST(TensorTable, LayerTensorsCoverTheRegistry) {
  CpuBackend cpu(1);
  std::mt19937_64 rng(test::test_seed());
  std::vector<Case> cases;
  cases.push_back(mlp_case(cpu, rng));
  cases.push_back(gpt_case(cpu, rng));
  for (const Case& c : cases) {
    const Model& m = *c.model;
    const ParameterRegistry& r = m.parameters();
    std::set<size_t> covered;
    for (int l = 0; l < m.layer_count(); ++l) {
      const std::vector<size_t> tensors = m.layer_tensors(l);
      EXPECT_FALSE(tensors.empty()) << "layer " << l;
      for (size_t i = 0; i < tensors.size(); ++i) {
        ASSERT_LT(tensors[i], r.size()) << "layer " << l;
        if (i > 0) {
          EXPECT_LT(tensors[i - 1], tensors[i]) << "layer " << l << ": not in registry order";
        }
        covered.insert(tensors[i]);
      }
    }
    EXPECT_EQ(covered.size(), r.size()) << "a tensor no layer declares";
    EXPECT_THROW(m.layer_tensors(m.layer_count()), Error);
    EXPECT_THROW(m.layer_tensors(-1), Error);
  }
  const Case& mlp = cases[0];
  for (int l = 0; l < mlp.model->layer_count(); ++l) {
    const std::string p = mlp_tensor_prefix(static_cast<size_t>(l));
    const ParameterRegistry& r = mlp.model->parameters();
    EXPECT_EQ(mlp.model->layer_tensors(l), (std::vector<size_t>{r.find(p + ".weight"), r.find(p + ".bias")}));
  }
  const Case& gpt = cases[1];
  const size_t wte = gpt.model->parameters().find("transformer.wte.weight");
  const size_t wpe = gpt.model->parameters().find("transformer.wpe.weight");
  const std::vector<size_t> first = gpt.model->layer_tensors(0);
  const std::vector<size_t> last = gpt.model->layer_tensors(gpt.model->layer_count() - 1);
  EXPECT_EQ(first, (std::vector<size_t>{std::min(wte, wpe), std::max(wte, wpe)}));
  EXPECT_EQ(std::count(last.begin(), last.end(), wte), 1);
  EXPECT_EQ(last.size(), 3u) << "ln_f's weight and bias, and wte";
}

TEST(TensorTable, MlpTensorsInSeparateBuffersMatchFlatBitwise) {
  CpuBackend cpu(1);
  std::mt19937_64 rng(test::test_seed());
  check_separate_buffers(cpu, mlp_case(cpu, rng));
}

TEST(TensorTable, GptTensorsInSeparateBuffersMatchFlatBitwise) {
  CpuBackend cpu(1);
  std::mt19937_64 rng(test::test_seed());
  check_separate_buffers(cpu, gpt_case(cpu, rng));
}

TEST(TensorTable, MlpRepointedFromLayerHooksMatchesFlatBitwise) {
  CpuBackend cpu(1);
  std::mt19937_64 rng(test::test_seed());
  check_repointing_hooks(cpu, mlp_case(cpu, rng));
}

TEST(TensorTable, GptRepointedFromLayerHooksMatchesFlatBitwise) {
  CpuBackend cpu(1);
  std::mt19937_64 rng(test::test_seed());
  check_repointing_hooks(cpu, gpt_case(cpu, rng));
}

}  // namespace
}  // namespace ddp
