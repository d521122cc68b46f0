// test_input_file.cpp: input files are read in proportion to what their
// header or their size on disk says, under a stated limit. What is not a
// regular file (a FIFO, /dev/zero) is refused without blocking, a gzip bomb
// is stopped, running out of memory while loading names the file, and a
// label the model cannot output names the file and the sample or line.
// Runs of build/ddp_train go through `timeout` (a blocked read fails the
// test instead of hanging it) and `ulimit -v` (a reader that grows without
// bound fails the test instead of taking the machine's memory).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/error.h"
#include "support/cli_test.h"
#include "support/temp_dir.h"
#include "support/test_support.h"
#include "trainer/data/csv_reader.h"
#include "trainer/io/data_error.h"
#include "trainer/io/data_file.h"
#include "trainer/data/distributed_sampler.h"
#include "trainer/data/idx_reader.h"
#include "trainer/io/input_file.h"

namespace ddp {
namespace {
namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

// ---- fixtures -------------------------------------------------------------------

void write_bytes(const std::string& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

void put_be32(Bytes& v, uint32_t x) {
  for (int s = 24; s >= 0; s -= 8) v.push_back(static_cast<uint8_t>(x >> s));
}

Bytes idx_header(const std::vector<uint32_t>& dims) {
  Bytes v = {0, 0, 0x08, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims) put_be32(v, d);
  return v;
}

// `rows` x 16 pixel images, labels from `labels`.
Bytes idx_images(uint32_t rows, std::mt19937_64& rng) {
  Bytes v = idx_header({rows, 4, 4});
  for (uint32_t i = 0; i < rows * 16; ++i) v.push_back(static_cast<uint8_t>(rng()));
  return v;
}
Bytes idx_labels(const std::vector<uint8_t>& labels) {
  Bytes v = idx_header({static_cast<uint32_t>(labels.size())});
  v.insert(v.end(), labels.begin(), labels.end());
  return v;
}

// A .npy v1.0 file: magic, version, padded header dict, data.
Bytes npy_bytes(const std::string& descr, const std::string& shape, const Bytes& data) {
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  const std::string file = std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(header.size() & 0xff) +
                           static_cast<char>(header.size() >> 8) + header;
  Bytes out(file.begin(), file.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

// One gzip member of `raw`, or of `zero_bytes` zeros when `raw` is empty.
Bytes gzip(const Bytes& raw, size_t zero_bytes = 0) {
  z_stream s{};
  EXPECT_EQ(deflateInit2(&s, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  const Bytes zeros(size_t{1} << 20, 0);
  Bytes out;
  Bytes chunk(size_t{1} << 20);
  auto pump = [&](const uint8_t* in, size_t n, int flush) {
    s.next_in = const_cast<Bytef*>(in);
    s.avail_in = static_cast<uInt>(n);
    do {
      s.next_out = chunk.data();
      s.avail_out = static_cast<uInt>(chunk.size());
      deflate(&s, flush);
      out.insert(out.end(), chunk.data(), chunk.data() + (chunk.size() - s.avail_out));
    } while (s.avail_out == 0);
  };
  if (!raw.empty()) pump(raw.data(), raw.size(), Z_NO_FLUSH);
  for (size_t done = 0; done < zero_bytes; done += zeros.size()) {
    pump(zeros.data(), std::min(zeros.size(), zero_bytes - done), Z_NO_FLUSH);
  }
  pump(nullptr, 0, Z_FINISH);
  deflateEnd(&s);
  return out;
}

// `header` followed by `gib` GiB of zeros as concatenated gzip members
// (gunzip accepts them as one stream): megabytes on disk, gigabytes inflated.
Bytes gzip_bomb(const Bytes& header, size_t gib) {
  Bytes out = gzip(header);
  const Bytes zeros_member = gzip({}, size_t{1} << 28);  // 256 MiB of zeros, ~250 KB
  for (size_t i = 0; i < 4 * gib; ++i) out.insert(out.end(), zeros_member.begin(), zeros_member.end());
  return out;
}

// Runs `action`, which must throw DataError whose one line holds every needle.
void expect_data_error(const std::function<void()>& action, std::initializer_list<std::string> needles) {
  try {
    action();
    ADD_FAILURE() << "no DataError thrown";
  } catch (const DataError& e) {
    const std::string message = e.what();
    for (const std::string& needle : needles)
      EXPECT_NE(message.find(needle), std::string::npos) << "missing '" << needle << "' in: " << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

// ---- ddp_train as a user runs it ------------------------------------------------------

// Under a 10 s timeout (a FIFO read blocks forever) and an address-space
// limit (an unbounded read stops at it instead of at the OOM killer).
test::CommandResult run_trainer(const std::string& args, long ulimit_kib = 3000000) {
  return test::run_command("ulimit -v " + std::to_string(ulimit_kib) + "; exec timeout -k 2 10 " +
                           test::trainer_command() + " " + args + " 2>&1");
}

std::string error_line(const test::CommandResult& r) { return test::single_error_line(r.output); }

// Exit status 1 (not 124: the timeout), one error line holding every
// needle, and nothing of the machinery: no source path, no bad_alloc.
void expect_refused(const test::CommandResult& r, std::initializer_list<std::string> needles) {
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const std::string line = error_line(r);
  ASSERT_FALSE(line.empty()) << "no single error line in:\n" << r.output;
  for (const std::string& needle : needles) EXPECT_NE(line.find(needle), std::string::npos) << needle << " in " << line;
  for (const char* leak : {"bad_alloc", ".cpp:", "failed:"}) EXPECT_EQ(line.find(leak), std::string::npos) << line;
}

class InputFileCli : public test::CliTest {
 protected:
  InputFileCli() : CliTest("input_file") {}
  void SetUp() override {
    rng.seed(test::test_seed());
    std::vector<uint8_t> labels(40);
    for (uint8_t& l : labels) l = static_cast<uint8_t>(rng() % 10);
    write_bytes(dir + "/img", idx_images(40, rng));
    write_bytes(dir + "/lab", idx_labels(labels));
    write_bytes(dir + "/x.npy", npy_bytes("<f4", "(4, 2)", Bytes(32, 0)));
    write_bytes(dir + "/y.npy", npy_bytes("<i8", "(4,)", Bytes(32, 0)));
    std::ofstream(dir + "/d.csv") << "a,b,label\n0.5,1,0\n1,2,1\n";
  }

  std::string idx_args(const std::string& images, const std::string& labels) const {
    return "--data idx --train-images " + images + " --train-labels " + labels + " --test-images " + dir +
           "/img --test-labels " + dir + "/lab --layers 16,8,10 --steps 1";
  }
  std::string npy_args(const std::string& x) const {
    return "--data npy --train-x " + x + " --train-y " + dir + "/y.npy --test-x " + dir + "/x.npy --test-y " + dir +
           "/y.npy --layers 2,2 --steps 1";
  }
  std::string csv_args(const std::string& train, const std::string& layers = "2,2") const {
    return "--data csv --train-csv " + train + " --test-csv " + dir + "/d.csv --layers " + layers + " --steps 1";
  }
  std::string make_fifo(const std::string& name) const {
    const std::string path = dir + "/" + name;
    EXPECT_EQ(mkfifo(path.c_str(), 0600), 0) << path;
    return path;
  }

  std::mt19937_64 rng;
};

TEST_F(InputFileCli, FifoAsAnyInputIsRefusedWithoutBlocking) {
  const std::string fifo = make_fifo("fifo");
  const std::string refused = fifo + ": not a regular file (a FIFO)";
  expect_refused(run_trainer(npy_args(fifo)), {refused});
  expect_refused(run_trainer(csv_args(fifo)), {refused});
  expect_refused(run_trainer(idx_args(fifo, dir + "/lab")), {refused});
  expect_refused(run_trainer(idx_args(dir + "/img", fifo)), {refused});
  expect_refused(run_trainer("--data synthetic --steps 1 --resume " + fifo), {refused});
}

TEST_F(InputFileCli, DevZeroIsRefused) {
  expect_refused(run_trainer(npy_args("/dev/zero")), {"/dev/zero: not a regular file (a character device)"});
  expect_refused(run_trainer(csv_args("/dev/zero")), {"/dev/zero: not a regular file (a character device)"});
}

TEST_F(InputFileCli, DirectoryIsRefused) {
  expect_refused(run_trainer(npy_args(dir)), {dir + ": not a regular file (a directory)"});
}

// The header says 40 images of 4x4; the stream inflates to 1 GiB more. The
// reader stops at the header's size (under a 1.5 GB address-space limit,
// inflating the whole bomb cannot succeed).
TEST_F(InputFileCli, GzipBombStopsAtTheSizeItsIdxHeaderStates) {
  Bytes images = idx_images(40, rng);
  write_bytes(dir + "/bomb.gz", gzip_bomb(images, 1));
  expect_refused(run_trainer(idx_args(dir + "/bomb.gz", dir + "/lab"), 1500000),
                 {dir + "/bomb.gz", "gzip", "IDX header"});
}

// A sparse .npy file whose 2 GiB of data match its header: it passes every
// size check, then cannot be held under a 1 GB address-space limit.
TEST_F(InputFileCli, OutOfMemoryWhileLoadingNamesTheFile) {
  const std::string path = dir + "/big.npy";
  // 4 GiB as the header says (sparse on disk), under a 3 GB address-space
  // limit: enough to start (a CUDA build maps its libraries), not to load.
  write_bytes(path, npy_bytes("<f4", "(536870912, 2)", {}));
  const uintmax_t header_bytes = fs::file_size(path);
  fs::resize_file(path, header_bytes + (uintmax_t{1} << 32));
  expect_refused(run_trainer(npy_args(path)), {path, "out of memory while loading"});
}

TEST_F(InputFileCli, LabelAboveTheOutputWidthNamesFileAndLine) {
  std::ofstream(dir + "/big_label.csv") << "a,b,label\n0.5,1,0\n1,2,1\n3,4,12\n5,6,1\n";
  expect_refused(run_trainer(csv_args(dir + "/big_label.csv", "2,10")),
                 {dir + "/big_label.csv", "line 4", "label 12", "--layers"});
}

TEST_F(InputFileCli, LabelAboveTheOutputWidthNamesFileAndSample) {
  const size_t bad_sample = rng() % 40;
  std::vector<uint8_t> labels(40, 3);
  labels[bad_sample] = 10;
  write_bytes(dir + "/lab11", idx_labels(labels));
  expect_refused(run_trainer(idx_args(dir + "/img", dir + "/lab11")),
                 {dir + "/lab11", "sample " + std::to_string(bad_sample), "label 10", "--layers"});

  Bytes y(32, 0);
  y[8 * 2] = 7;  // sample 2's i8 label
  write_bytes(dir + "/y7.npy", npy_bytes("<i8", "(4,)", y));
  expect_refused(run_trainer("--data npy --train-x " + dir + "/x.npy --train-y " + dir + "/y.npy --test-x " + dir +
                             "/x.npy --test-y " + dir + "/y7.npy --layers 2,4 --steps 1"),
                 {dir + "/y7.npy", "sample 2", "label 7", "--layers"});
}

TEST_F(InputFileCli, CheckpointFileAboveItsLimitIsRefused) {
  // A sparse 70 GiB file: above the fixed cap on any machine.
  const std::string path = dir + "/huge.ddpckpt";
  write_bytes(path, {});
  fs::resize_file(path, uintmax_t{70} << 30);
  expect_refused(run_trainer("--data synthetic --steps 1 --resume " + path), {path, "limit"});
}

// ---- the reading rules, in process -----------------------------------------------------

TEST(InputFile, ReadsExactlyTheFileAndRefusesAboveTheCallersLimit) {
  const test::TempDir temp_dir("input_file");
  const std::string& dir = temp_dir.path();
  std::mt19937_64 rng(test::test_seed());
  Bytes content(1000 + rng() % 1000);
  for (uint8_t& b : content) b = static_cast<uint8_t>(rng());
  write_bytes(dir + "/f", content);
  EXPECT_EQ(read_input_file(dir + "/f", content.size(), "data file"), content);
  expect_data_error([&] { read_input_file(dir + "/f", content.size() - 1, "config file"); },
                    {dir + "/f", "config file", std::to_string(content.size()), "limit"});
  std::ofstream(dir + "/t") << "steps = 3\n";
  EXPECT_EQ(read_text_file(dir + "/t", 1 << 20, "config file"), "steps = 3\n");
  expect_data_error([&] { read_text_file(dir + "/t", 5, "config file"); }, {dir + "/t", "config file", "limit"});
  expect_data_error([&] { read_text_file(dir + "/none", 5, "config file"); }, {dir + "/none", "cannot open"});
  EXPECT_GT(input_limit_bytes(), size_t{1} << 20);
  EXPECT_LE(input_limit_bytes(), kInputFileCapBytes);
}

// A file is read in 64 MiB calls (so a start-up signal is handled between
// them): one of several calls comes back whole, each call's bytes in place.
TEST(InputFile, AFileOfSeveralReadCallsIsReadWholeAndInOrder) {
  const test::TempDir temp_dir("input_file_big");
  const std::string& dir = temp_dir.path();
  std::mt19937_64 rng(test::test_seed());
  const size_t chunk = size_t{64} << 20, size = 2 * chunk + 1 + rng() % 4096;
  {
    std::ofstream out(dir + "/big", std::ios::binary);
    out.seekp(static_cast<std::streamoff>(size - 1));
    out.put('\x7f');
  }
  std::vector<std::pair<size_t, uint8_t>> marks = {{0, 1}, {chunk - 1, 2}, {chunk, 3}, {2 * chunk, 4}};
  for (const auto& [at, value] : marks) {
    std::fstream f(dir + "/big", std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(static_cast<std::streamoff>(at));
    f.put(static_cast<char>(value));
  }
  const Bytes bytes = read_input_file(dir + "/big", size, "data file");
  ASSERT_EQ(bytes.size(), size);
  for (const auto& [at, value] : marks) EXPECT_EQ(bytes[at], value) << at;
  EXPECT_EQ(bytes[size - 1], 0x7f);
  EXPECT_EQ(bytes[chunk + 1], 0);
}

TEST(InputFile, GunzipStopsAtTheCallersLimit) {
  const Bytes compressed = gzip({}, size_t{1} << 24);  // 16 MiB of zeros
  EXPECT_EQ(gunzip_bytes(compressed, "z.gz", size_t{1} << 24).size(), size_t{1} << 24);
  expect_data_error([&] { gunzip_bytes(compressed, "z.gz", (size_t{1} << 24) - 1); }, {"z.gz", "gzip", "limit"});
}

TEST(InputFile, GzippedIdxHeaderAboveTheLimitIsRefusedBeforeInflating) {
  const test::TempDir temp_dir("input_file");
  const std::string& dir = temp_dir.path();
  write_bytes(dir + "/huge.gz", gzip(idx_header({0xffffffffu, 0xffffffffu, 0xffffffffu})));
  expect_data_error([&] { read_idx_file(dir + "/huge.gz"); }, {dir + "/huge.gz", "IDX", "limit"});
}

// The first line's 100,000 fields times a million short lines asked for
// 400 GB up front; the blank second line is the error.
TEST(InputFile, CsvWideFirstLineThenManyLinesIsNotAnAllocation) {
  std::string text;
  for (int i = 0; i < 100000; ++i) text += "1,";
  text += "0\n";
  text.append(1000000, '\n');
  text += "1,0\n";
  expect_data_error([&] { parse_csv(text, "wide.csv"); }, {"wide.csv", "line 2", "blank line"});
}

TEST(InputFile, SamplerErrorsNameTheFlagNotTheSource) {
  for (const auto& [samples, drop_last, needle] : std::vector<std::tuple<size_t, bool, std::string>>{
           {3, true, "--drop-last"}, {0, false, "no training samples"}}) {
    try {
      DistributedSampler(samples, 0, 4, 1, true, drop_last);
      ADD_FAILURE() << "no error for " << samples << " samples";
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(needle), std::string::npos) << message;
      EXPECT_EQ(message.find(".cpp:"), std::string::npos) << message;
    }
  }
}

}  // namespace
}  // namespace ddp
