// fuzz_token_file.cpp: libFuzzer harness of the token-file readers
// (trainer/data/token_files.h) and of --data text as a whole
// (trainer/data/text_data.h). The bytes are parsed in each of the three
// --token-format modes; each stream that parses is checked against its
// vocabulary and cut into windows, which must pass validate_dataset. Then the
// same bytes, as a file, go through load_text_train_test with a block size,
// a format and a validation split taken from the input's last byte, so
// the header checks, the split arithmetic and the refusals are all reached.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "fuzz_support.h"
#include "trainer/data/dataset.h"
#include "trainer/data/text_data.h"
#include "trainer/data/token_files.h"
#include "trainer/data/token_windows.h"

using namespace ddp;
using namespace ddp::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static MemFile file("fuzz-tokens");
  const Bytes bytes(data, data + size);
  const uint8_t knob = size > 0 ? data[size - 1] : 0;
  const size_t block_size = 1 + knob % 16;
  for (TokenFormat format : {TokenFormat::Auto, TokenFormat::Bytes, TokenFormat::RawU16}) {
    expect_parser_error([&] {
      const TokenStream s = parse_token_bytes(bytes, format, "fuzz.bin");
      const TokenVocab vocab = token_vocab(s.encoding, 0);
      require_tokens_below(s, vocab.real_vocab_size, vocab.bound_text);
      if (token_window_count(s.tokens.size(), block_size) == 0) return;
      const Dataset d = make_token_windows(s.tokens, 0, s.tokens.size(), block_size, vocab.vocab_size,
                                           vocab.real_vocab_size, "fuzz.bin");
      validate_dataset(d, "fuzz.bin");
      // Every window is the stream shifted by one: a broken layout aborts.
      for (size_t i = 0; i + 1 < d.token_ids.size(); ++i)
        if (d.labels[i] != s.tokens[i / block_size * block_size + i % block_size + 1]) std::abort();
    });
  }
  file.write(bytes);
  DataConfig c;
  c.kind = "text";
  c.train_text = file.path();
  c.block_size = static_cast<int64_t>(block_size);
  c.token_format = knob & 0x10 ? "raw-u16" : "auto";
  c.val_fraction = 0.05 + 0.9 * (knob >> 5) / 7.0;
  c.vocab_size = knob & 0x80 ? 1 + knob % 100 : 0;
  expect_parser_error([&] {
    const TrainTestData d = load_text_train_test(c);
    validate_dataset(d.train, "train");
    validate_dataset(d.test, "val");
  });
  return 0;
}
