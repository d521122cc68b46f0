// test_support.cpp
#include "support/test_support.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>

namespace ddp::test {

uint64_t test_seed() {
  if (const char* s = std::getenv("DDP_TEST_SEED")) return std::strtoull(s, nullptr, 10);
  static const uint64_t seed = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
                               (static_cast<uint64_t>(getpid()) << 32);
  return seed;
}

std::string seed_text() { return "seed " + std::to_string(test_seed()) + " (set DDP_TEST_SEED to reproduce)"; }

std::vector<lowp16> random_halves(std::mt19937_64& rng, size_t count, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<lowp16> out(count);
  for (auto& h : out) h = to_half(dist(rng));
  return out;
}

std::vector<float> random_floats(std::mt19937_64& rng, size_t count, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> out(count);
  for (auto& f : out) f = dist(rng);
  return out;
}

std::vector<int32_t> random_labels(std::mt19937_64& rng, size_t count, int classes) {
  std::uniform_int_distribution<int32_t> dist(0, classes - 1);
  std::vector<int32_t> out(count);
  for (auto& l : out) l = dist(rng);
  return out;
}

std::vector<lowp16> poison_halves(size_t count) { return std::vector<lowp16>(count, lowp16{kPoisonHalfBits}); }

std::vector<float> to_floats(const std::vector<lowp16>& h) {
  std::vector<float> out(h.size());
  for (size_t i = 0; i < h.size(); ++i) out[i] = half_to_float(h[i]);
  return out;
}

std::vector<double> to_doubles(const std::vector<lowp16>& h) {
  std::vector<double> out(h.size());
  for (size_t i = 0; i < h.size(); ++i) out[i] = half_to_float(h[i]);
  return out;
}

bool close_enough(double got, double want, double rel, double abs_floor) {
  if (std::isnan(got) || std::isnan(want)) return false;
  if (std::isinf(want)) return got == want;
  return std::fabs(got - want) <= rel * std::fabs(want) + abs_floor;
}

std::string make_temp_dir(const std::string& tag) {
  namespace fs = std::filesystem;
  std::string pattern = (fs::temp_directory_path() / ("ddp_test_" + tag + "_XXXXXX")).string();
  if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed for " + pattern);
  return pattern;
}

CommandResult run_command(const std::string& command) {
  CommandResult r;
  FILE* p = popen(command.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

double relative_update_difference(const std::vector<float>& a, const std::vector<float>& b,
                                  const std::vector<float>& start) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    norm += (double(b[i]) - start[i]) * (double(b[i]) - start[i]);
  }
  return std::sqrt(diff / norm);
}

std::string single_error_line(const std::string& output) {
  std::istringstream in(output);
  std::string line, found;
  int count = 0;
  while (std::getline(in, line))
    if (line.rfind("ddp_train: error", 0) == 0) {
      found = line;
      ++count;
    }
  return count == 1 ? found : "";
}

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_random_csv(const std::string& path, int rows, std::mt19937_64& rng) {
  std::ofstream out(path);
  out << "a,b,c,d,label\n";
  std::uniform_real_distribution<float> u(-1, 1);
  for (int i = 0; i < rows; ++i)
    out << u(rng) << "," << u(rng) << "," << u(rng) << "," << u(rng) << "," << i % 3 << "\n";
}

}  // namespace ddp::test
