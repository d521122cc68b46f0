// fuzz_seeds.cpp: writes the seed corpora of the parser harnesses, small
// valid files of every format (and a few near-misses), so the fuzzer starts
// from inputs that get past the magic numbers:
//   fuzz_seeds DIR   ->   DIR/{idx,npy,csv,checkpoint,config,safetensors,token_file}/<seed files>
// Checkpoints come from serialize_checkpoint and f4 arrays from
// save_npy_fp32, so the seeds are what this build writes; other .npy dtypes
// and IDX files are written by hand as numpy and the MNIST tools lay them out.
// Also DIR/config.dict, fuzz_config's dictionary, from `ddp_train --help`.
#include <zlib.h>

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "launch/cli/options.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/checkpoint_v1.h"
#include "trainer/models/mlp/mlp_config.h"
#include "trainer/io/safetensors.h"
#include "trainer/io/npy_header.h"
#include "trainer/io/npy_io.h"
#include "trainer/data/token_files.h"

namespace fs = std::filesystem;
using ddp::fuzz::Bytes;

namespace {

fs::path g_root;

void write_seed(const std::string& corpus, const std::string& name, const Bytes& bytes) {
  const fs::path dir = g_root / corpus;
  fs::create_directories(dir);
  std::ofstream out(dir / name, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out) {
    std::fprintf(stderr, "fuzz_seeds: cannot write %s\n", (dir / name).c_str());
    std::exit(1);
  }
}

Bytes text_bytes(const std::string& text) { return Bytes(text.begin(), text.end()); }

Bytes concat(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Bytes split_pair(const Bytes& first, const Bytes& second) {
  return concat(concat(first, text_bytes(ddp::fuzz::kSplitMarker)), second);
}

Bytes gzip(const Bytes& raw) {
  z_stream s{};
  if (deflateInit2(&s, Z_BEST_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) std::abort();
  Bytes out(deflateBound(&s, raw.size()) + 64);
  s.next_in = const_cast<Bytef*>(raw.data());
  s.avail_in = static_cast<uInt>(raw.size());
  s.next_out = out.data();
  s.avail_out = static_cast<uInt>(out.size());
  if (deflate(&s, Z_FINISH) != Z_STREAM_END) std::abort();
  out.resize(s.total_out);
  deflateEnd(&s);
  return out;
}

// ---- IDX ------------------------------------------------------------------------

Bytes idx_bytes(const std::vector<uint32_t>& dims, uint8_t fill_from = 0) {
  Bytes out = {0, 0, 0x08, static_cast<uint8_t>(dims.size())};
  size_t count = 1;
  for (uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(d >> shift));
    count *= d;
  }
  for (size_t i = 0; i < count; ++i) out.push_back(static_cast<uint8_t>(fill_from + i * 37));
  return out;
}

void idx_seeds() {
  const Bytes images3 = idx_bytes({3, 2, 2});
  const Bytes images2 = idx_bytes({4, 3});
  Bytes labels3 = {0, 0, 0x08, 1, 0, 0, 0, 3, 0, 2, 1};
  Bytes labels4 = {0, 0, 0x08, 1, 0, 0, 0, 4, 9, 0, 3, 1};
  write_seed("idx", "images-idx3", images3);
  write_seed("idx", "images-idx2", images2);
  write_seed("idx", "labels-idx1", labels3);
  write_seed("idx", "images-idx3.gz", gzip(images3));
  write_seed("idx", "empty-idx1", {0, 0, 0x08, 1, 0, 0, 0, 0});
  write_seed("idx", "float-dtype", {0, 0, 0x0D, 1, 0, 0, 0, 1, 0, 0, 0x80, 0x3f});
  write_seed("idx", "pair-idx3", split_pair(images3, labels3));
  write_seed("idx", "pair-idx2", split_pair(images2, labels4));
  write_seed("idx", "pair-gz", split_pair(gzip(images3), gzip(labels3)));
}

// ---- .npy -----------------------------------------------------------------------

// numpy's layout: magic, version, header length, dict padded to 64 with '\n'.
Bytes npy_bytes(const std::string& dict, const Bytes& data, int major = 1) {
  const size_t length_bytes = major == 1 ? 2 : 4;
  std::string header = dict;
  while ((8 + length_bytes + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  Bytes out = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<uint8_t>(major), 0};
  for (size_t i = 0; i < length_bytes; ++i) out.push_back(static_cast<uint8_t>(header.size() >> (8 * i)));
  return concat(concat(out, text_bytes(header)), data);
}

template <typename T>
Bytes le_bytes(const std::vector<T>& values) {  // x86-64 and arm64 are little-endian
  Bytes out(values.size() * sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

Bytes read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

void npy_seeds() {
  const std::vector<float> x = {0.5f, -1.0f, 2.0f, 0.0f, 1.5f, 3.25f};
  const fs::path f4_path = g_root / "npy-f4.tmp";
  ddp::save_npy_fp32(f4_path.string(), x.data(), {3, 2});
  const Bytes x_f4 = read_file(f4_path);
  fs::remove(f4_path);

  using ddp::format_npy_header;
  const Bytes x_f8 = npy_bytes(format_npy_header("<f8", {3, 2}), le_bytes(std::vector<double>{1, 2, 3, 4, 5, 6}));
  const Bytes x_u1 = npy_bytes(format_npy_header("|u1", {3, 2}), {0, 1, 2, 250, 255, 7});
  const Bytes y_i8 = npy_bytes(format_npy_header("<i8", {3}), le_bytes(std::vector<int64_t>{0, 2, 1}));
  const Bytes y_i4 = npy_bytes(format_npy_header("<i4", {3}), le_bytes(std::vector<int32_t>{1, 0, 1}), 2);
  const Bytes y_f4 = npy_bytes(format_npy_header("<f4", {3, 1}), le_bytes(std::vector<float>{0.1f, 0.2f, 0.3f}), 3);
  write_seed("npy", "x-f4", x_f4);
  write_seed("npy", "x-f8", x_f8);
  write_seed("npy", "x-u1", x_u1);
  write_seed("npy", "y-i8", y_i8);
  write_seed("npy", "y-i4-v2", y_i4);
  write_seed("npy", "y-f4-v3", y_f4);
  write_seed("npy", "scalar-f4", npy_bytes(format_npy_header("<f4", {}), le_bytes(std::vector<float>{1})));
  write_seed(
      "npy", "py2-long",
      npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 1L), }", le_bytes(std::vector<float>{1, 2})));
  write_seed("npy", "x-f4.gz", gzip(x_f4));
  write_seed("npy", "pair-f4-i8", split_pair(x_f4, y_i8));
  write_seed("npy", "pair-u1-i4", split_pair(x_u1, y_i4));
  write_seed("npy", "pair-f8-f4", split_pair(x_f8, y_f4));
  write_seed("npy", "pair-gz", split_pair(gzip(x_f4), gzip(y_i8)));
}

// ---- CSV ------------------------------------------------------------------------

void csv_seeds() {
  write_seed("csv", "header", text_bytes("a,b,label\n0.5,1,0\n-2,3e2,2\n+1.25,.5,1\n\n"));
  write_seed("csv", "no-header", text_bytes("1,2,0\r\n3,4,1\r\n5, 6 ,1"));
  write_seed("csv", "bad-label", text_bytes("x,y\n1,0.5\n"));
  write_seed("csv", "header.gz", gzip(text_bytes("f0,f1,f2,y\n0,0,0,3\n1,1,1,0\n")));
}

// ---- checkpoints ----------------------------------------------------------------

// States the trainer could write (they pass validate_checkpoint_contents),
// so the fuzzer starts from files that get past every check: with momentum,
// 12 steps into epoch 1; without, 3 steps all skipped (the momentum buffer is
// there, zero; hysteresis 1 lowered by the 3 overflows to -2).
ddp::TrainState small_state(std::vector<int64_t> widths, bool momentum) {
  ddp::TrainState s;
  s.model_dims = widths;
  s.activation = "relu";
  s.loss = "mse";
  size_t params = 0;
  for (size_t i = 0; i + 1 < widths.size(); ++i)
    params += static_cast<size_t>(widths[i] * widths[i + 1] + widths[i + 1]);
  for (size_t i = 0; i < params; ++i) s.master_weights_fp32.push_back(0.01f * static_cast<float>(i));
  s.momentum_fp32.assign(params, momentum ? 0.5f : 0.0f);
  s.momentum_initialized = momentum;
  s.scaler.scale = 32768.0;
  s.scaler.growth_tracker = momentum ? 7 : 0;
  s.scaler.hysteresis_left = momentum ? 1 : -2;
  s.step = momentum ? 12 : 3;
  s.skipped_steps = momentum ? 0 : 3;
  s.epoch = 1;
  s.epoch_sample_offset = 64;
  s.seed = 42;
  s.optimizer_steps = s.step - s.skipped_steps;
  const ddp::ParameterRegistry registry = ddp::mlp_parameters(widths);
  for (const ddp::ParameterTensor& t : registry.tensors()) s.tensors.push_back({t.name, t.shape});
  return s;
}

void checkpoint_seeds() {
  const Bytes a = ddp::serialize_checkpoint(small_state({10, 10}, true));
  write_seed("checkpoint", "ckpt-10-10", a);
  write_seed("checkpoint", "ckpt-4-3-2", ddp::serialize_checkpoint(small_state({4, 3, 2}, false)));
  write_seed("checkpoint", "ckpt-empty", ddp::serialize_checkpoint(ddp::TrainState{}));
  ddp::TrainState adamw = small_state({4, 3, 2}, true);
  adamw.optimizer = "adamw";
  adamw.second_moment_fp32.assign(adamw.master_weights_fp32.size(), 0.25f);
  write_seed("checkpoint", "ckpt-adamw", ddp::serialize_checkpoint(adamw));
  write_seed("checkpoint", "ckpt-v1-10-10", ddp::serialize_checkpoint_v1(small_state({10, 10}, true)));
  write_seed("checkpoint", "ckpt-truncated", Bytes(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(a.size() / 2)));
}

// ---- safetensors ------------------------------------------------------------------

// encode_safetensors's files (what --save-weights writes), F16/BF16 ones, and
// a hand-written header listed out of buffer order with padding, as the
// reference implementation writes them.
void safetensors_seeds() {
  using ddp::SafetensorsDtype;
  const std::vector<float> w = {0.5f, -1.0f, 2.0f, 0.25f, -0.125f, 3.0f}, b = {1.0f, -2.0f};
  auto as_bytes = [](const std::vector<float>& v) { return reinterpret_cast<const uint8_t*>(v.data()); };
  write_seed("safetensors", "mlp-3-2-f32",
             ddp::encode_safetensors({{"0.weight", SafetensorsDtype::F32, {2, 3}, as_bytes(w), 24},
                                      {"0.bias", SafetensorsDtype::F32, {2}, as_bytes(b), 8}},
                                     {{"format", "pt"}}));
  const Bytes halves = {0x00, 0x3c, 0x00, 0xbc, 0x00, 0x40, 0x00, 0x34, 0x00, 0x30, 0x00, 0x42, 0x00, 0x3c, 0x00, 0xc0};
  write_seed("safetensors", "mlp-3-2-f16",
             ddp::encode_safetensors({{"0.weight", SafetensorsDtype::F16, {2, 3}, halves.data(), 12},
                                      {"0.bias", SafetensorsDtype::BF16, {2}, halves.data() + 12, 4}},
                                     {}));
  write_seed("safetensors", "empty", ddp::encode_safetensors({}, {}));
  const std::string header =
      "{\"__metadata__\":{\"format\":\"pt\"},"
      "\"0.bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[24,32]},"
      "\"0.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}  ";
  Bytes file;
  for (int i = 0; i < 8; ++i) file.push_back(static_cast<uint8_t>(header.size() >> (8 * i)));
  file.insert(file.end(), header.begin(), header.end());
  file.insert(file.end(), as_bytes(w), as_bytes(w) + 24);
  file.insert(file.end(), as_bytes(b), as_bytes(b) + 8);
  write_seed("safetensors", "reference-order", file);
  write_seed("safetensors", "truncated", Bytes(file.begin(), file.end() - 3));
}

// ---- token files (--data text) ------------------------------------------------------

// An llm.c shard as its dev/data/data_common.py writes one: 256 int32, then uint16 tokens.
Bytes llmc_shard(const std::vector<uint16_t>& tokens, int32_t version = ddp::kLlmcVersion) {
  std::vector<int32_t> header(ddp::kLlmcHeaderInts, 0);
  header[0] = ddp::kLlmcMagic;
  header[1] = version;
  header[2] = static_cast<int32_t>(tokens.size());
  return concat(le_bytes(header), le_bytes(tokens));
}

void token_file_seeds() {
  std::vector<uint16_t> gpt2;
  for (uint16_t i = 0; i < 200; ++i) gpt2.push_back(static_cast<uint16_t>((i * 7919u) % 50257u));
  write_seed("token_file", "shakespeare.txt",
             text_bytes("First Citizen:\nBefore we proceed any further, hear me "
                        "speak.\n\nAll:\nSpeak, speak.\n"));
  write_seed("token_file", "llmc-v1.bin", llmc_shard(gpt2));
  write_seed("token_file", "llmc-v2.bin", llmc_shard(gpt2, 2));
  write_seed("token_file", "llmc-header-only.bin", llmc_shard({}));
  write_seed("token_file", "raw-u16.bin", concat(le_bytes(gpt2), Bytes{0x10}));  // last byte: the raw-u16 knob
}

// ---- --config INI -----------------------------------------------------------------

void config_seeds() {
  write_seed("config", "basic.ini",
             text_bytes("# a run\ndevice = cpu\nlayers = 784,256,10\nbatch-size = 64\nlr = 0.05\n"
                        "epochs = 2\nlr-schedule = step\nlr-step-size = 100\n"));
  write_seed("config", "synthetic.ini",
             text_bytes("data = synthetic\nsynthetic-samples = 256\nloss-scale = static:1024\n"
                        "nesterov = true\nmomentum = 0.9\nseed = 7\n"));
  write_seed("config", "faults.ini",
             text_bytes("inject-overflow = 3,5,9\ninject-overflow-every = 4\n"
                        "global-batch = 128\ngrad-accum = 2\ngrad-predivide = 2\n"
                        "[ignored]\nclip-grad-norm = 1.0\n"));
  write_seed("config", "output.ini",
             text_bytes("metrics = run.jsonl\ncheckpoint-dir = ck\ncheckpoint-every = 10\n"
                        "keep-checkpoints = 2\nsave-weights = w\nbench = 1\n"
                        "loss-scale = dynamic\ninit-scale = 1e4\nhysteresis = 2\n"));
  write_seed("config", "bad-value.ini", text_bytes("lr = fast\n"));
}

// libFuzzer dictionary of fuzz_config: every option name as `--help` lists
// it (so options added later are in it without anyone editing a list), and
// the values the parser tells apart.
void config_dictionary() {
  const char* argv[] = {"ddp_train", "--help", nullptr};
  const std::string help = ddp::parse_options(2, argv).help_text;
  std::set<std::string> names;  // descriptions mention options too
  for (size_t at = help.find("--"); at != std::string::npos; at = help.find("--", at + 2)) {
    size_t end = at + 2;
    while (end < help.size() && (std::isalnum(static_cast<unsigned char>(help[end])) || help[end] == '-')) ++end;
    if (end > at + 2 && (at == 0 || help[at - 1] == ' ')) names.insert(help.substr(at + 2, end - at - 2));
  }
  std::string dict = "# generated by fuzz_seeds from ddp_train --help\n";
  for (const std::string& name : names) dict += "\"" + name + " = \"\n";
  for (const char* word : {"cpu",
                           "cuda",
                           "auto",
                           "synthetic",
                           "npy",
                           "idx",
                           "csv",
                           "fashion-mnist",
                           "relu",
                           "gelu",
                           "xent",
                           "mse",
                           "constant",
                           "step",
                           "cosine",
                           "dynamic",
                           "none",
                           "static:",
                           "true",
                           "false",
                           "yes",
                           "no",
                           "on",
                           "off",
                           "1e308",
                           "-1",
                           "0",
                           "nan",
                           "inf",
                           "9223372036854775807",
                           "18446744073709551616",
                           "[section]",
                           "#",
                           "%value%",
                           "%canonical_option%"}) {
    dict += "\"" + std::string(word) + "\"\n";
  }
  write_seed(".", "config.dict", text_bytes(dict));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_seeds DIR\n");
    return 2;
  }
  g_root = argv[1];
  fs::create_directories(g_root);
  idx_seeds();
  npy_seeds();
  csv_seeds();
  checkpoint_seeds();
  config_seeds();
  config_dictionary();
  safetensors_seeds();
  token_file_seeds();
  return 0;
}
