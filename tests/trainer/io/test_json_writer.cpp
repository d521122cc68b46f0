// test_json_writer.cpp: JSON Lines records (exact numbers, null for
// non-finite values, escaping, overloads) and the metrics file, checked
// against a real JSON parser (Python's) where one is installed.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>

#include <gtest/gtest.h>

#include "kernels/error.h"
#include "support/test_support.h"
#include "trainer/io/json_writer.h"

namespace ddp {
namespace {

namespace fs = std::filesystem;

// The value text of a one-key record {"v":<value>}.
std::string value_text(const JsonRecord& record) {
  const std::string line = record.str();
  const size_t colon = line.find(':');
  EXPECT_NE(colon, std::string::npos) << line;
  EXPECT_EQ(line.back(), '}') << line;
  return line.substr(colon + 1, line.size() - colon - 2);
}

uint64_t bits_of(double v) {
  uint64_t b;
  std::memcpy(&b, &v, 8);
  return b;
}
uint32_t bits_of(float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  return b;
}

void expect_double_round_trips(double v) {
  const std::string text = value_text(JsonRecord().add("v", v));
  char* end = nullptr;
  const double back = std::strtod(text.c_str(), &end);
  EXPECT_EQ(*end, '\0') << text;
  EXPECT_EQ(bits_of(back), bits_of(v)) << "wrote " << text << " for " << std::hexfloat << v;
}

void expect_float_round_trips(float v) {
  const std::string text = value_text(JsonRecord().add("v", v));
  char* end = nullptr;
  const float back = std::strtof(text.c_str(), &end);
  EXPECT_EQ(*end, '\0') << text;
  EXPECT_EQ(bits_of(back), bits_of(v)) << "wrote " << text << " for " << std::hexfloat << v;
}

const std::vector<double>& special_doubles() {
  static const std::vector<double> values = {0.1,
                                             1e300,
                                             -0.0,
                                             0.0,
                                             1.0 / 3.0,
                                             5e-324,
                                             std::numeric_limits<double>::denorm_min(),
                                             DBL_MIN,
                                             DBL_MIN / 3.0,
                                             DBL_MAX,
                                             -DBL_MAX,
                                             9007199254740993.0,  // 2^53 + 1 rounds to 2^53
                                             1.2345678901234568e20,
                                             65536.0,
                                             1e-7,
                                             2.302585092994046};
  return values;
}

// ---- numbers --------------------------------------------------------------------

TEST(JsonWriterNumbers, ShortestForms) {
  EXPECT_EQ(value_text(JsonRecord().add("v", 0.1)), "0.1");
  EXPECT_EQ(value_text(JsonRecord().add("v", 1e300)), "1e+300");
  EXPECT_EQ(value_text(JsonRecord().add("v", -0.0)), "-0");
  EXPECT_EQ(value_text(JsonRecord().add("v", 65536.0)), "65536");
  EXPECT_EQ(value_text(JsonRecord().add("v", 0.1f)), "0.1");  // float: shortest float text
}

TEST(JsonWriterNumbers, DoublesRoundTripExactly) {
  for (double v : special_doubles()) {
    expect_double_round_trips(v);
    expect_double_round_trips(-v);
  }
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 100000; ++i) {
    uint64_t bits = rng();
    if (i % 10 == 0) bits &= 0x800fffffffffffffull;  // subnormals
    double v;
    std::memcpy(&v, &bits, 8);
    if (!std::isfinite(v)) continue;
    expect_double_round_trips(v);
  }
}

TEST(JsonWriterNumbers, FloatsRoundTripExactly) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (float v : {0.1f, -0.0f, FLT_MIN, FLT_MAX, std::numeric_limits<float>::denorm_min(), 65504.0f}) {
    expect_float_round_trips(v);
  }
  for (int i = 0; i < 100000; ++i) {
    uint32_t bits = static_cast<uint32_t>(rng());
    if (i % 10 == 0) bits &= 0x807fffffu;  // subnormals
    float v;
    std::memcpy(&v, &bits, 4);
    if (!std::isfinite(v)) continue;
    expect_float_round_trips(v);
  }
}

TEST(JsonWriterNumbers, NonFiniteIsNull) {
  JsonRecord r;
  r.add("inf", std::numeric_limits<double>::infinity())
      .add("ninf", -std::numeric_limits<double>::infinity())
      .add("nan", std::nan(""))
      .add("fnan", std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(r.str(), R"({"inf":null,"ninf":null,"nan":null,"fnan":null})");
}

TEST(JsonWriterNumbers, IntegersAreExact) {
  JsonRecord r;
  r.add("int", -3)
      .add("size", size_t{18446744073709551615u})
      .add("i64min", std::numeric_limits<int64_t>::min())
      .add("i64max", std::numeric_limits<int64_t>::max())
      .add("ll", 12345678901234LL)
      .add("u16", static_cast<unsigned short>(65535))
      .add("u32", 4294967295u);
  EXPECT_EQ(r.str(), R"({"int":-3,"size":18446744073709551615,"i64min":-9223372036854775808,)"
                     R"("i64max":9223372036854775807,"ll":12345678901234,"u16":65535,"u32":4294967295})");
}

// ---- records ----------------------------------------------------------------------

TEST(JsonWriterRecord, KeysInInsertionOrderAndOverloads) {
  JsonRecord r;
  r.add("event", "step").add("step", 3).add("loss", 0.5).add("skipped", false).add("ok", true);
  r.add("name", std::string("run1")).add("none", static_cast<const char*>(nullptr));
  EXPECT_EQ(r.str(), R"({"event":"step","step":3,"loss":0.5,"skipped":false,"ok":true,"name":"run1","none":null})");
  EXPECT_EQ(JsonRecord().str(), "{}");
}

TEST(JsonWriterRecord, DuplicateKeyThrows) {
  JsonRecord r;
  r.add("step", 1);
  EXPECT_THROW(r.add("step", 2), Error);
}

TEST(JsonWriterStrings, Escaping) {
  EXPECT_EQ(json_string("plain"), R"("plain")");
  EXPECT_EQ(json_string("a\"b\\c"), R"("a\"b\\c")");
  EXPECT_EQ(json_string(std::string("\n\t\r\b\f\x01\x1f\x7f", 8)),
            "\"\\u000a\\u0009\\u000d\\u0008\\u000c\\u0001\\u001f\x7f\"");
  EXPECT_EQ(json_string(std::string("nul\0end", 7)), R"("nul\u0000end")");
  EXPECT_EQ(json_string("h\xc3\xa9llo \xe2\x9c\x93 \xf0\x9f\x98\x80"),
            "\"h\xc3\xa9llo \xe2\x9c\x93 \xf0\x9f\x98\x80\"");
  // Invalid UTF-8: one U+FFFD per bad byte.
  EXPECT_EQ(json_string("a\xff"
                        "b"),
            R"("a\ufffdb")");
  EXPECT_EQ(json_string("\xc0\xaf"), R"("\ufffd\ufffd")");                      // overlong '/'
  EXPECT_EQ(json_string("\xed\xa0\x80"), R"("\ufffd\ufffd\ufffd")");            // surrogate
  EXPECT_EQ(json_string("\xe2\x82"), R"("\ufffd\ufffd")");                      // cut short
  EXPECT_EQ(json_string("\xf4\x90\x80\x80"), R"("\ufffd\ufffd\ufffd\ufffd")");  // above U+10FFFF
  // Keys are escaped too.
  EXPECT_EQ(JsonRecord().add("k\"", 1).str(), R"({"k\"":1})");
}

// ---- metrics file -----------------------------------------------------------------

class JsonWriterFile : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = test::make_temp_dir("json"); }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string dir_;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST_F(JsonWriterFile, EachRecordIsAFlushedLineAndOpeningTruncates) {
  const std::string path = dir_ + "/metrics.jsonl";
  {
    std::ofstream old(path);
    old << "old contents\n";
  }
  MetricsFile metrics(path);
  EXPECT_EQ(slurp(path), "");
  metrics.write(JsonRecord().add("event", "start"));
  EXPECT_EQ(slurp(path), "{\"event\":\"start\"}\n");  // visible before the file is closed
  metrics.write(JsonRecord().add("event", "step").add("step", 1));
  EXPECT_EQ(slurp(path), "{\"event\":\"start\"}\n{\"event\":\"step\",\"step\":1}\n");
}

TEST_F(JsonWriterFile, UncreatableFileIsNamed) {
  const std::string path = dir_ + "/missing/metrics.jsonl";
  try {
    MetricsFile metrics(path);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

// A write that fails (here a file size limit of 0 bytes, as a full disk
// fails it) removes the file this run created and never wrote, and keeps
// one that was there before (a resumed run's records). Run in a child: the
// limit is the process's.
TEST_F(JsonWriterFile, AFailedFirstWriteLeavesNoEmptyFileBehind) {
  const std::string fresh = dir_ + "/fresh.jsonl", earlier = dir_ + "/earlier.jsonl";
  std::ofstream(earlier) << "{\"event\":\"start\"}\n";
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    signal(SIGXFSZ, SIG_IGN);  // the write fails with EFBIG instead of ending the process
    const rlimit none{0, 0};
    setrlimit(RLIMIT_FSIZE, &none);
    int refused = 0;
    for (const auto& [path, append] : {std::pair{fresh, false}, std::pair{earlier, true}}) {
      try {
        MetricsFile metrics(path, append);
        metrics.write(JsonRecord().add("event", "step"));
      } catch (const Error& e) {
        refused += std::string(e.what()).find("--metrics " + path + ": cannot write") != std::string::npos;
      }
    }
    _exit(refused == 2 ? 0 : 1);
  }
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "both writes must fail, naming the file";
  EXPECT_FALSE(fs::exists(fresh)) << "an empty metrics file was left behind";
  EXPECT_EQ(slurp(earlier), "{\"event\":\"start\"}\n") << "a file that was there before is kept";
}

bool run_ok(const std::string& command) {
  const int rc = std::system(command.c_str());
  return rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 0;
}

// Python's json module is the independent judge: every line must parse, and
// what it reads must be what we wrote (numbers to the bit, strings exactly).
TEST_F(JsonWriterFile, PythonParsesEveryLine) {
  const char* python = "/usr/bin/python3";
  if (access(python, X_OK) != 0) GTEST_SKIP() << python << " not installed";
  const std::string path = dir_ + "/metrics.jsonl";
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  {
    MetricsFile metrics(path);
    std::vector<double> values = special_doubles();
    for (int i = 0; i < 2000; ++i) {
      uint64_t bits = rng();
      if (i % 10 == 0) bits &= 0x800fffffffffffffull;
      double v;
      std::memcpy(&v, &bits, 8);
      if (std::isfinite(v)) values.push_back(v);
    }
    for (double v : values) {
      char hex[64];
      std::snprintf(hex, sizeof(hex), "%a", v);
      metrics.write(JsonRecord().add("event", "double").add("v", v).add("hex", std::string(hex)));
    }
    std::string all_ascii;
    for (int c = 0; c < 128; ++c) all_ascii += static_cast<char>(c);
    metrics.write(JsonRecord()
                      .add("event", "strings")
                      .add("ascii", all_ascii)
                      .add("utf8", "h\xc3\xa9llo \xe2\x9c\x93 \xf0\x9f\x98\x80")
                      .add("bad",
                           "\xff"
                           "ok")
                      .add("inf", std::numeric_limits<double>::infinity())
                      .add("nan", std::nan(""))
                      .add("big", std::numeric_limits<int64_t>::min())
                      .add("flag", true));
  }

  // The plain check, as a one-liner would do it.
  EXPECT_TRUE(
      run_ok(std::string(python) + " -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1])]' '" + path + "'"));

  const std::string script = dir_ + "/check.py";
  {
    std::ofstream out(script);
    out << R"PY(import json, sys
text = open(sys.argv[1], encoding='utf-8').read()
assert text.endswith('\n'), 'last line not terminated'
records = [json.loads(line) for line in text.split('\n')[:-1]]
for r in records:
    if r['event'] == 'double':
        assert float(r['v']) == float.fromhex(r['hex']), r
    else:
        assert list(r.keys()) == ['event', 'ascii', 'utf8', 'bad', 'inf', 'nan', 'big', 'flag'], r
        assert r['ascii'] == ''.join(chr(c) for c in range(128)), r['ascii']
        assert r['utf8'] == 'h\u00e9llo \u2713 \U0001F600', r['utf8']
        assert r['bad'] == '\ufffdok', r['bad']
        assert r['inf'] is None and r['nan'] is None
        assert r['big'] == -2**63 and r['flag'] is True
print(len(records), 'records ok')
)PY";
  }
  const std::string log = dir_ + "/check.log";
  const bool ok = run_ok(std::string(python) + " '" + script + "' '" + path + "' >'" + log + "' 2>&1");
  EXPECT_TRUE(ok) << slurp(log);
}

}  // namespace
}  // namespace ddp
