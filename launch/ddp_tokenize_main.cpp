// ddp_tokenize_main.cpp: the `ddp_tokenize` entry point: text files to one
// llm.c .bin shard of GPT-2 tokens, which `ddp_train --data text
// --train-text` reads.
//
//   trainer/tokenizer/gpt2_tokenizer.h  GPT-2's BPE (r50k_base): pre-tokenizer, merges, threads
//   trainer/tokenizer/utf8_repair.h     invalid UTF-8 -> U+FFFD, as Python's decode(errors="replace")
//   trainer/data/llmc_token_writer.h    the .bin shard (header, uint16 tokens), written atomically
//   trainer/io/input_file.h             bounded reads of regular files
//
// Each input file is one document, preceded by <|endoftext|> as llm.c's
// data scripts do (dev/data/fineweb.py: tokens = [eot] + encode_ordinary).
// Everything that can refuse the input (flags, the ranks table, the output
// path, every input's type and size) runs before the first file is
// tokenized, and the output is written once, at the end, atomically.
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <new>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <boost/program_options.hpp>
#include <sys/stat.h>

#include "kernels/error.h"
#include "trainer/data/llmc_token_writer.h"
#include "trainer/data/token_files.h"
#include "trainer/io/input_file.h"
#include "trainer/io/output_directory.h"
#include "trainer/io/output_registry.h"
#include "trainer/tokenizer/gpt2_tokenizer.h"
#include "trainer/tokenizer/utf8_repair.h"

namespace {

namespace fs = std::filesystem;
namespace po = boost::program_options;

// Inputs from this size on get a progress line on stderr, at most one a second.
constexpr size_t kProgressFromBytes = size_t{32} << 20;

struct TokenizeOptions {
  std::string tokenizer;
  std::string ranks_path;
  std::vector<std::string> inputs;
  std::string output_path;
  int threads = 1;
  bool overwrite = false;
  bool show_help = false;
  std::string help_text;
};

TokenizeOptions parse_options(int argc, char** argv) {
  TokenizeOptions o;
  const unsigned cores = std::thread::hardware_concurrency();
  o.threads = cores > 0 ? static_cast<int>(cores) : 1;
  const std::string usage =
      "ddp_tokenize: text files to GPT-2 tokens in one llm.c .bin shard (for ddp_train --data text)\n\n"
      "Usage: ddp_tokenize --tokenizer gpt2 --ranks data/gpt2.tiktoken in.txt... -o out.bin\n\n"
      "Each input file is one document: <|endoftext|> (50256) comes before each, as llm.c's data\n"
      "scripts write them; <|endoftext|> written in a text is tokenized as ordinary text (tiktoken's\n"
      "encode_ordinary). Invalid UTF-8 becomes U+FFFD first, as Python's bytes.decode(\"utf-8\",\n"
      "\"replace\") makes it (said on stderr). The ids are the same at any --threads.\n\n";
  po::options_description visible("Options");
  // clang-format off
  visible.add_options()
      ("help,h", "print this help and exit")
      ("tokenizer", po::value(&o.tokenizer)->required(), "the tokenizer: gpt2 (GPT-2's BPE, tiktoken's r50k_base)")
      ("ranks", po::value(&o.ranks_path)->required(),
       "the BPE ranks file: GPT-2's r50k_base, gpt2.tiktoken (launch/fetch_gpt2_ranks.sh DIR fetches it; "
       "its sha256 is checked)")
      ("output,o", po::value(&o.output_path)->required(), "the llm.c .bin shard to write (written whole, atomically)")
      ("threads", po::value(&o.threads)->default_value(o.threads),
       "threads encoding chunks of a file (default: the machine's cores)")
      ("overwrite", po::bool_switch(&o.overwrite),
       "replace an existing --output that ddp_train's tools did not write (one they wrote, as recorded in "
       "$XDG_STATE_HOME/ddp_train/outputs.jsonl, is replaced without it, saying so)");
  // clang-format on
  po::options_description hidden;
  hidden.add_options()("input", po::value(&o.inputs));
  po::options_description all;
  all.add(visible).add(hidden);
  po::positional_options_description positional;
  positional.add("input", -1);
  po::variables_map vm;
  po::store(po::command_line_parser(argc, argv).options(all).positional(positional).run(), vm);
  std::ostringstream help;
  help << usage << visible;
  o.help_text = help.str();
  o.show_help = vm.count("help") > 0;
  if (o.show_help) return o;
  po::notify(vm);
  if (o.tokenizer != "gpt2") throw ddp::Error("--tokenizer " + o.tokenizer + ": the one tokenizer is gpt2");
  if (o.inputs.empty()) throw ddp::Error("no input file: give one or more text files after the options");
  if (o.threads < 1) throw ddp::Error("--threads " + std::to_string(o.threads) + ": must be at least 1");
  if (o.output_path.empty()) throw ddp::Error("--output: the path is empty");
  return o;
}

bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  return fs::exists(a, ec) && fs::exists(b, ec) && fs::equivalent(a, b, ec);
}

bool starts_with_llmc_magic(const std::string& path) {
  const std::vector<uint8_t> head = ddp::read_file_head(path, 4);
  if (head.size() < 4) return false;
  const uint32_t magic = uint32_t{head[0]} | uint32_t{head[1]} << 8 | uint32_t{head[2]} << 16 | uint32_t{head[3]} << 24;
  return static_cast<int32_t>(magic) == ddp::kLlmcMagic;
}

// The output is never an input, a directory or a file the user had: an
// existing file is replaced when this project wrote it (an earlier shard,
// trainer/io/output_registry.h), anyone else's only with --overwrite, as
// ddp_train's outputs. Returns the line to print when one is replaced.
std::string check_output(const TokenizeOptions& o) {
  const std::string& out = o.output_path;
  std::vector<std::string> inputs = o.inputs;
  inputs.push_back(o.ranks_path);
  for (const std::string& input : inputs)
    if (same_file(out, input))
      throw ddp::Error("--output " + out + " is one of the inputs (" + input + "): choose another path");
  std::error_code ec;
  const fs::file_status status = fs::status(out, ec);
  if (fs::exists(status) && !fs::is_regular_file(status))
    throw ddp::Error("--output " + out + ": exists and is not a file; refusing to replace it");
  ddp::require_output_directory(out, "--output");
  return ddp::check_replaceable(out, "--output", o.overwrite);
}

// Every input a non-empty regular file, before any is tokenized. Returns their total size.
size_t check_inputs(const std::vector<std::string>& inputs) {
  size_t total = 0;
  for (const std::string& path : inputs) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) throw ddp::DataError(path, std::string("cannot be read: ") + std::strerror(errno));
    if (!S_ISREG(st.st_mode)) throw ddp::DataError(path, "not a regular file");
    if (st.st_size == 0) throw ddp::DataError(path, "is empty: no text to tokenize");
    // Its header and uint16 tokens would be tokenized as text, silently.
    if (starts_with_llmc_magic(path))
      throw ddp::DataError(path,
                           "is already an llm.c .bin token shard (its magic " + std::to_string(ddp::kLlmcMagic) +
                               "), not text: ddp_train --data text --train-text reads it as it is");
    ddp::require_within_limit(path, static_cast<size_t>(st.st_size), ddp::input_limit_bytes(), "the text");
    total += static_cast<size_t>(st.st_size);
  }
  return total;
}

// One input's tokens appended to `tokens`, its end-of-text first.
template <typename Progress>
void tokenize_file(const std::string& path, const ddp::Gpt2Tokenizer& tokenizer, int threads,
                   std::vector<uint32_t>& tokens, Progress&& progress) {
  std::vector<uint8_t> raw = ddp::read_input_file(path, ddp::input_limit_bytes(), "text file");
  ddp::RepairedUtf8 text = ddp::repair_utf8(std::string(raw.begin(), raw.end()));
  std::vector<uint8_t>().swap(raw);
  if (text.replacements > 0)
    std::fprintf(stderr,
                 "ddp_tokenize: %s: %zu ill-formed UTF-8 sequence(s), the first at byte %zu, replaced by U+FFFD "
                 "(as Python's bytes.decode(\"utf-8\", \"replace\"))\n",
                 path.c_str(), text.replacements, text.first_bad_offset);
  tokens.push_back(tokenizer.end_of_text());
  const std::vector<uint32_t> ids = tokenizer.encode(text.text, threads, ddp::kEncodeChunkBytes, progress);
  tokens.insert(tokens.end(), ids.begin(), ids.end());
}

// What a file whose tokenizing ran out of memory needed: its text twice
// (read, then repaired), and 4 bytes a token (about one token per 4 bytes
// of English), twice while they join the earlier files' tokens.
std::string out_of_memory_text(const std::string& path, size_t tokens_before) {
  std::error_code ec;
  const double text_mb = 1e-6 * static_cast<double>(fs::file_size(path, ec));
  const long before_mb = static_cast<long>(4e-6 * static_cast<double>(tokens_before));
  char needed[160];
  std::snprintf(needed, sizeof needed, "about %.0f MB (its %.1f MB of text twice, and its tokens at 4 bytes each, twice)",
                4 * text_mb, text_mb);
  std::string text = path + ": out of memory while tokenizing it: it needs " + needed;
  if (before_mb >= 1) text += " beside the earlier files' " + std::to_string(before_mb) + " MB of tokens";
  return text + "; tokenize it in parts";
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int run(const TokenizeOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  const ddp::Gpt2Tokenizer tokenizer = ddp::Gpt2Tokenizer::from_ranks_file(o.ranks_path);
  const std::string replacing = check_output(o);
  const size_t total_bytes = check_inputs(o.inputs);
  const bool show_progress = total_bytes >= kProgressFromBytes;
  size_t bytes_before = 0;  // of the files already tokenized
  double last_progress_s = 0;
  std::vector<uint32_t> tokens;
  for (const std::string& path : o.inputs) {
    try {
      tokenize_file(path, tokenizer, o.threads, tokens, [&](size_t done) {
        const double now = seconds_since(start);
        if (!show_progress || now - last_progress_s < 1.0) return;
        last_progress_s = now;
        const double mb = 1e-6 * static_cast<double>(bytes_before + done);
        std::fprintf(stderr, "ddp_tokenize: %.1f of %.1f MB (%.0f%%), %.1f s\n", mb, 1e-6 * total_bytes,
                     100.0 * mb / (1e-6 * total_bytes), now);
      });
    } catch (const std::bad_alloc&) {
      throw ddp::Error(out_of_memory_text(path, tokens.size()));
    }
    std::error_code ec;
    bytes_before += static_cast<size_t>(fs::file_size(path, ec));
  }
  if (!replacing.empty()) std::fprintf(stderr, "%s\n", replacing.c_str());
  ddp::write_llmc_shard(o.output_path, tokens);
  const double elapsed = seconds_since(start);
  std::printf(
      "ddp_tokenize: wrote %s: %zu tokens (GPT-2, vocabulary %zu) from %zu document(s), %.1f MB, in %.2f s "
      "(%.1f MB/s, %d thread(s))\n",
      o.output_path.c_str(), tokens.size(), tokenizer.vocab_size(), o.inputs.size(), 1e-6 * total_bytes, elapsed,
      1e-6 * total_bytes / elapsed, o.threads);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  TokenizeOptions options;
  try {
    options = parse_options(argc, argv);
  } catch (const po::error& e) {
    std::fprintf(stderr, "ddp_tokenize: %s (see --help)\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddp_tokenize: %s (see --help)\n", e.what());
    return 2;
  }
  if (options.show_help) {
    std::printf("%s", options.help_text.c_str());
    return 0;
  }
  try {
    return run(options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddp_tokenize: error: %s\n", e.what());
    return 1;
  }
}
