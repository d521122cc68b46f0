// test_checkpoint_v2.cpp: checkpoint format version 2 (checkpoint_v2.h), a
// safetensors file: its layout as the safetensors reader sees it, the
// optimizer's tensors by name, and the refusal of every kind of damage
// (cut, flipped, appended, a header that lies about offsets, dtypes or
// shapes, missing or extra tensors, metadata that is not ours) in one line.
// Files are crafted through the safetensors writer and resealed with an
// independent transcription of the documented checksum.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "checkpoint_test_support.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/checkpoint_dir.h"
#include "trainer/checkpoint/checkpoint_v1.h"
#include "trainer/io/safetensors.h"

namespace ddp {
namespace {

using namespace test;  // checkpoint_test_support.h

using CheckpointV2 = CheckpointTest;

// A file's tensors and metadata, to change and encode again.
struct Parts {
  std::vector<std::string> names;
  std::vector<SafetensorsDtype> dtypes;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<std::vector<uint8_t>> bytes;
  std::map<std::string, std::string> metadata;
};

Parts parts_of(const std::vector<uint8_t>& file) {
  const SafetensorsFile f = parse_safetensors(file, "parts");
  Parts p;
  for (const SafetensorsTensor& t : f.tensors) {
    p.names.push_back(t.name);
    p.dtypes.push_back(t.dtype);
    p.shapes.push_back(t.shape);
    const uint8_t* at = f.bytes.data() + f.buffer_start + t.begin_byte;
    p.bytes.emplace_back(at, at + (t.end_byte - t.begin_byte));
  }
  p.metadata = f.metadata;
  return p;
}

// checkpoint_v2.h's rule, written again from its description: CRC-32 over
// "name\0dtype\0d0,d1\0begin,end\n" per tensor in buffer order, then
// "key\0value\n" per metadata entry but crc32 (sorted by key), then the
// buffer.
std::string reseal_crc(const Parts& p) {
  std::string text;
  size_t offset = 0;
  std::vector<uint8_t> buffer;
  for (size_t i = 0; i < p.names.size(); ++i) {
    std::string dims;
    for (size_t d = 0; d < p.shapes[i].size(); ++d) dims += (d ? "," : "") + std::to_string(p.shapes[i][d]);
    text += p.names[i] + '\0' + safetensors_dtype_name(p.dtypes[i]) + '\0' + dims + '\0' + std::to_string(offset) +
            ',' + std::to_string(offset + p.bytes[i].size()) + '\n';
    offset += p.bytes[i].size();
    buffer.insert(buffer.end(), p.bytes[i].begin(), p.bytes[i].end());
  }
  for (const auto& [key, value] : p.metadata)
    if (key != "crc32") text += key + '\0' + value + '\n';
  uLong crc = crc32(0L, reinterpret_cast<const Bytef*>(text.data()), static_cast<uInt>(text.size()));
  crc = crc32(crc, buffer.data(), static_cast<uInt>(buffer.size()));
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08lx", static_cast<unsigned long>(crc));
  return hex;
}

// Encodes `p`, with tensor_bytes and the checksum made to agree unless told not to.
std::vector<uint8_t> encode(Parts p, bool fix_lengths = true, bool fix_crc = true) {
  if (fix_lengths) {
    size_t total = 0;
    for (const auto& b : p.bytes) total += b.size();
    p.metadata["tensor_bytes"] = std::to_string(total);
  }
  if (fix_crc) p.metadata["crc32"] = reseal_crc(p);
  std::vector<SafetensorsTensorOut> out;
  for (size_t i = 0; i < p.names.size(); ++i)
    out.push_back({p.names[i], p.dtypes[i], p.shapes[i], p.bytes[i].data(), p.bytes[i].size()});
  return encode_safetensors(out, p.metadata);
}

size_t index_of(const Parts& p, const std::string& name) {
  for (size_t i = 0; i < p.names.size(); ++i)
    if (p.names[i] == name) return i;
  ADD_FAILURE() << name << " not in the file";
  return 0;
}

std::string problem(const std::vector<uint8_t>& bytes) {
  return checkpoint_error_of([&] { parse_checkpoint(bytes, "c.safetensors"); });
}

TrainState adamw_state(int64_t step) {
  TrainState s = small_state(step);
  s.optimizer = "adamw";
  s.optimizer_settings = {{"lr", "0.001"}, {"beta2", "0.95"}};
  for (size_t i = 0; i < s.master_weights_fp32.size(); ++i) s.second_moment_fp32.push_back(0.125f * i);
  return s;
}

TEST_F(CheckpointV2, TheSafetensorsReaderSeesEveryTensorAndTheState) {
  const std::vector<uint8_t> bytes = serialize_checkpoint(small_state(7));
  const SafetensorsFile f = parse_safetensors(bytes, "c");
  std::vector<std::string> names;
  for (const SafetensorsTensor& t : f.tensors) {
    names.push_back(t.name);
    EXPECT_EQ(t.dtype, SafetensorsDtype::F32) << t.name;
  }
  // The weights under their state_dict names (registry order), then one momentum tensor each.
  EXPECT_EQ(names,
            (std::vector<std::string>{"2.weight", "2.bias", "0.weight", "0.bias", "optim.momentum.2.weight",
                                      "optim.momentum.2.bias", "optim.momentum.0.weight", "optim.momentum.0.bias"}));
  EXPECT_EQ(f.find("0.weight")->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(f.metadata.at("ddp_train.checkpoint"), "2");
  EXPECT_EQ(f.metadata.at("format"), "pt");
  EXPECT_EQ(f.metadata.at("step"), "7");
  EXPECT_EQ(f.metadata.at("model"), "mlp");
  EXPECT_EQ(f.metadata.at("model_dims"), "3,2,2");
  EXPECT_EQ(f.metadata.at("crc32").size(), 8u);
  // Values: the packed weights, tensor by tensor.
  std::vector<float> packed;
  for (const char* n : {"2.weight", "2.bias", "0.weight", "0.bias"}) {
    const std::vector<float> v = f.values_fp32(*f.find(n));
    packed.insert(packed.end(), v.begin(), v.end());
  }
  EXPECT_EQ(packed, small_state(7).master_weights_fp32);
}

TEST_F(CheckpointV2, AdamWStateIsExpAvgAndExpAvgSqAndRoundTrips) {
  const TrainState want = adamw_state(9);
  const std::vector<uint8_t> bytes = serialize_checkpoint(want);
  const SafetensorsFile f = parse_safetensors(bytes, "c");
  ASSERT_NE(f.find("optim.exp_avg.0.weight"), nullptr);
  ASSERT_NE(f.find("optim.exp_avg_sq.0.bias"), nullptr);
  EXPECT_EQ(f.find("optim.momentum.0.weight"), nullptr);
  EXPECT_EQ(f.metadata.at("optimizer"), "adamw");
  EXPECT_EQ(f.metadata.at("optimizer.beta2"), "0.95");
  expect_same_state(want, parse_checkpoint(bytes, "c"));
}

TEST_F(CheckpointV2, EveryTruncationIsRefused) {
  const std::vector<uint8_t> good = serialize_checkpoint(adamw_state(3));
  for (size_t length = 0; length < good.size(); ++length) {
    const std::vector<uint8_t> cut(good.begin(), good.begin() + length);
    const std::string text = problem(cut);
    ASSERT_TRUE(contains(text, "truncated (file ends after " + std::to_string(length) + " bytes)"))
        << "length " << length << ": " << text;
  }
}

TEST_F(CheckpointV2, EveryFlippedByteIsRefused) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  const std::vector<uint8_t> good = serialize_checkpoint(adamw_state(5));
  const size_t buffer_start = parse_safetensors(good, "c").buffer_start;
  std::uniform_int_distribution<int> mask(1, 255);
  for (size_t position = 0; position < good.size(); ++position) {
    std::vector<uint8_t> bytes = good;
    bytes[position] ^= static_cast<uint8_t>(mask(rng_));
    // One blank of the header's padding turned into another changes no
    // content (the checksum covers the contents, not the JSON's layout).
    auto blank = [](uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
    if (blank(good[position]) && blank(bytes[position])) continue;
    std::string text;
    try {
      parse_checkpoint(bytes, "c.safetensors");
      text = "<accepted>";
    } catch (const CheckpointError& e) {
      text = e.what();
    }
    // Any flip is refused; one in the tensor bytes only the checksum can see.
    ASSERT_EQ(text.rfind("checkpoint c.safetensors: ", 0), 0u)
        << "position " << position << " (of " << good.size() << ", tensors from " << buffer_start << "), byte "
        << int(good[position]) << " -> " << int(bytes[position]) << ": " << text;
    if (position >= buffer_start) {
      ASSERT_TRUE(contains(text, "checksum mismatch")) << position << ": " << text;
    }
  }
}

TEST_F(CheckpointV2, TheChecksumCoversTheMetadataAndTheTable) {
  const Parts good = parts_of(serialize_checkpoint(small_state(5)));
  Parts p = good;
  p.metadata["step"] = "6";  // valid JSON, a plausible value: only the checksum tells
  EXPECT_TRUE(contains(problem(encode(p, true, false)), "checksum mismatch (file corrupt)"));
  p = good;
  std::swap(p.names[0], p.names[1]);  // the table's names swapped
  std::swap(p.shapes[0], p.shapes[1]);
  std::swap(p.bytes[0], p.bytes[1]);
  EXPECT_TRUE(contains(problem(encode(p, true, false)), "checksum mismatch (file corrupt)"));
  // And resealed by the documented rule, the same file reads: the rule is the one written down.
  EXPECT_EQ(parse_checkpoint(encode(good), "c").step, 5);
}

TEST_F(CheckpointV2, AppendedBytesAreRefused) {
  std::vector<uint8_t> bytes = serialize_checkpoint(small_state(5));
  bytes.insert(bytes.end(), {1, 2, 3});
  EXPECT_TRUE(contains(problem(bytes), "3 unexpected bytes after the end of the checkpoint"));
}

TEST_F(CheckpointV2, AHeaderThatLiesIsRefusedNamingTheTensor) {
  const std::vector<uint8_t> good_bytes = serialize_checkpoint(adamw_state(5));
  const Parts good = parts_of(good_bytes);
  // Offsets that run past the buffer, through the raw header (the writer would not write them).
  {
    std::string text(good_bytes.begin(), good_bytes.end());
    const size_t at = text.find("\"data_offsets\":[0,");
    ASSERT_NE(at, std::string::npos);
    text.replace(at, 18, "\"data_offsets\":[9,");
    const std::string message = problem(std::vector<uint8_t>(text.begin(), text.end()));
    EXPECT_TRUE(contains(message, "corrupt: tensor")) << message;
  }
  Parts p = good;
  const size_t w = index_of(p, "0.weight");
  p.dtypes[w] = SafetensorsDtype::F16;
  p.bytes[w].resize(p.bytes[w].size() / 2);
  EXPECT_TRUE(contains(problem(encode(p)), "tensor '0.weight' is F16 (checkpoints hold F32)")) << problem(encode(p));
  p = good;
  const size_t m = index_of(p, "optim.exp_avg_sq.0.bias");
  p.names.erase(p.names.begin() + m);
  p.dtypes.erase(p.dtypes.begin() + m);
  p.shapes.erase(p.shapes.begin() + m);
  p.bytes.erase(p.bytes.begin() + m);
  EXPECT_TRUE(contains(problem(encode(p)), "tensor 'optim.exp_avg_sq.0.bias' is missing")) << problem(encode(p));
  p = good;
  p.names.push_back("optim.momentum.0.bias");
  p.dtypes.push_back(SafetensorsDtype::F32);
  p.shapes.push_back({2});
  p.bytes.push_back(std::vector<uint8_t>(8, 0));
  EXPECT_TRUE(contains(problem(encode(p)), "tensor 'optim.momentum.0.bias' is not part of a adamw checkpoint"))
      << problem(encode(p));
  p = good;
  const size_t e = index_of(p, "optim.exp_avg.0.weight");
  p.shapes[e] = {3, 2};
  EXPECT_TRUE(contains(problem(encode(p)), "tensor 'optim.exp_avg.0.weight' has another shape")) << problem(encode(p));
  p = good;
  p.metadata["tensor_bytes"] = "8";  // lies: shorter than the buffer
  EXPECT_TRUE(contains(problem(encode(p, false)), "unexpected bytes after the end"));
  p.metadata["tensor_bytes"] = "100000";
  EXPECT_TRUE(contains(problem(encode(p, false)), "truncated"));
}

TEST_F(CheckpointV2, ALanguageModelsTokenizerIsRecordedAndReadBack) {
  TrainState want = adamw_state(4);
  for (const char* tokenizer : {"gpt2", "bytes"}) {
    want.tokenizer = tokenizer;
    const std::vector<uint8_t> bytes = serialize_checkpoint(want);
    EXPECT_EQ(parse_safetensors(bytes, "c").metadata.at("tokenizer"), tokenizer);
    expect_same_state(want, parse_checkpoint(bytes, "c"));
  }
  // A run that knew none writes no key, and reads back none.
  want.tokenizer.clear();
  const std::vector<uint8_t> bytes = serialize_checkpoint(want);
  EXPECT_EQ(parse_safetensors(bytes, "c").metadata.count("tokenizer"), 0u);
  EXPECT_EQ(parse_checkpoint(bytes, "c").tokenizer, "");
}

TEST_F(CheckpointV2, MetadataThatIsNotOursIsRefused) {
  const Parts good = parts_of(serialize_checkpoint(small_state(5)));
  Parts p = good;
  p.metadata.erase("ddp_train.checkpoint");
  EXPECT_TRUE(contains(problem(encode(p)), "not a ddp_train checkpoint (a safetensors file without"));
  p = good;
  p.metadata["ddp_train.checkpoint"] = "3";
  EXPECT_TRUE(contains(problem(encode(p)), "unsupported checkpoint format version '3' (this build reads 1 and 2)"));
  p = good;
  p.metadata["step"] = "12x";
  EXPECT_TRUE(contains(problem(encode(p)), "corrupt header: step is '12x' (not an integer in range)"));
  p = good;
  p.metadata["seed"] = "-1";
  EXPECT_TRUE(contains(problem(encode(p)), "corrupt header: seed is '-1'"));
  p = good;
  p.metadata.erase("epoch");
  EXPECT_TRUE(contains(problem(encode(p)), "corrupt header: no epoch in __metadata__"));
  p = good;
  p.metadata["surprise"] = "1";
  EXPECT_TRUE(contains(problem(encode(p)), "unknown __metadata__ key 'surprise'"));
  p = good;
  p.metadata["model_dims"] = "3,,2";
  EXPECT_TRUE(contains(problem(encode(p)), "model_dims is '3,,2'"));
  p = good;
  p.metadata["tokenizer"] = "words";
  EXPECT_TRUE(contains(problem(encode(p)), "tokenizer is 'words' (not bytes or gpt2)"));
  p = good;
  p.metadata["optimizer"] = "lion";
  EXPECT_TRUE(contains(problem(encode(p)), "optimizer is 'lion'"));
  // Not a safetensors file, nor format 1.
  EXPECT_TRUE(contains(problem({'{', '"', 'a', '"', ':', '1', '}', '\n', 'x', 'y'}), "bad magic"));
  std::vector<uint8_t> not_json = serialize_checkpoint(small_state(5));
  not_json[9] = '!';
  EXPECT_TRUE(contains(problem(not_json), "corrupt header"));
}

TEST_F(CheckpointV2, FuzzedInputNeverCrashes) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  const std::vector<uint8_t> good = serialize_checkpoint(adamw_state(4));
  std::uniform_int_distribution<int> byte_dist(0, 255);
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<uint8_t> bytes = good;
    const int flips = 1 + static_cast<int>(rng_() % 6);
    for (int f = 0; f < flips; ++f) bytes[rng_() % bytes.size()] = static_cast<uint8_t>(byte_dist(rng_));
    if (rng_() % 3 == 0) bytes.resize(rng_() % bytes.size());
    if (bytes.size() != good.size()) {
      problem(bytes);  // a cut file never parses (flips before the cut may be named first)
      continue;
    }
    try {
      parse_checkpoint(bytes, "fuzz");
      // The checksum covers the contents, not the JSON's layout: only a
      // whitespace byte turned into another (the header's padding) may pass.
      auto blank = [](uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
      for (size_t i = 0; i < bytes.size(); ++i)
        if (bytes[i] != good[i] && !(blank(bytes[i]) && blank(good[i])))
          ADD_FAILURE() << "a file changed at byte " << i << " parsed";
    } catch (const CheckpointError&) {
    }
  }
}

// A directory of either format: the newest valid checkpoint wins, whichever
// format; the header of a v1 file reads too (pruning decides on it).
TEST_F(CheckpointV2, ADirectoryOfFormat1CheckpointsStillResumes) {
  const std::string v1_name = "ckpt-step000000000009.ddpckpt";
  write_bytes(path(v1_name), serialize_checkpoint_v1(small_state(9)));
  write_checkpoint_atomic(path(checkpoint_file_name(4)), small_state(4));
  const CheckpointScan scan = find_newest_valid_checkpoint(dir_);
  EXPECT_EQ(scan.newest_valid, path(v1_name));
  EXPECT_EQ(scan.candidates, 2u);
  const TrainState s = read_checkpoint(scan.newest_valid);
  EXPECT_EQ(s.format_version, 1u);
  EXPECT_EQ(s.optimizer, "sgd");
  EXPECT_EQ(s.optimizer_steps, 9);
  EXPECT_EQ(read_checkpoint_header(path(v1_name)).step, 9);
  EXPECT_EQ(read_checkpoint_header(path(checkpoint_file_name(4))).model_kind, "mlp");
  EXPECT_EQ(list_checkpoints(dir_).size(), 2u);
}

}  // namespace
}  // namespace ddp
