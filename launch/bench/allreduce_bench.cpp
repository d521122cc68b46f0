// allreduce_bench.cpp
#include "launch/bench/allreduce_bench.h"

#include <boost/program_options.hpp>

#include <cctype>
#include <cstdio>
#include <limits>
#include <sstream>

#include "kernels/error.h"

namespace ddp {
namespace po = boost::program_options;

size_t parse_size_bytes(const std::string& text, const std::string& flag) {
  const auto bad = [&] { return Error(flag + ": '" + text + "' is not a size in bytes (e.g. 4096, 4K, 256M, 1G)"); };
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0 || digits > 15) throw bad();
  const size_t number = std::stoull(text.substr(0, digits));
  const std::string suffix = text.substr(digits);
  int shift = 0;
  if (suffix.empty())
    shift = 0;
  else if (suffix.size() == 1 && std::toupper(static_cast<unsigned char>(suffix[0])) == 'K')
    shift = 10;
  else if (suffix.size() == 1 && std::toupper(static_cast<unsigned char>(suffix[0])) == 'M')
    shift = 20;
  else if (suffix.size() == 1 && std::toupper(static_cast<unsigned char>(suffix[0])) == 'G')
    shift = 30;
  else
    throw bad();
  if (number == 0) throw Error(flag + " must be positive");
  if (number > (std::numeric_limits<size_t>::max() >> shift)) throw bad();
  return number << shift;
}

ParsedAllreduceBenchOptions parse_allreduce_bench_options(int argc, const char* const argv[]) {
  ParsedAllreduceBenchOptions out;
  AllreduceBenchOptions& o = out.options;
  std::string min_bytes = "4K", max_bytes = "256M";
  int64_t factor = static_cast<int64_t>(o.factor);  // signed: Boost reads "-1" into a size_t as a huge number
  po::options_description desc(
      "bench_allreduce: in-place FP16 all-reduce of our communicator next to plain MPI_Allreduce\n"
      "(nccl-tests style: algbw = bytes / time, busbw = algbw * 2(N-1)/N)\n\n"
      "Usage: mpirun -np N bench_allreduce [options]\n\n"
      "Per size: the time is the max over ranks of each rank's mean over --iters in-place\n"
      "all-reduces (after --warmup untimed ones and a barrier). 'ours' is the communicator's\n"
      "allreduce_sum_lowp of bytes/2 FP16 elements (--device cpu: MpiCommunicator, an MPI\n"
      "user-defined op that adds in FP32; --device cuda: NcclCommunicator, rank r on GPU\n"
      "local_rank). On CPU two references of the same byte count: MPI_Allreduce MPI_FLOAT\n"
      "sum of bytes/4 elements ('MPI float') and MPI_SHORT sum of bytes/2 ('MPI short', a\n"
      "built-in op on as many 2-byte elements as ours). 'ours/float' = MPI float time / ours\n"
      "time (= the busbw ratio). '#wrong': elements not equal to the closed-form sum after one\n"
      "more all-reduce of freshly filled buffers, summed over ranks (non-zero: exit 1).\n"
      "Only rank 0 prints; progress for slow sizes goes to stderr.\n\nOptions");
  desc.add_options()("help,h", "this text")("min-bytes,b", po::value(&min_bytes)->default_value(min_bytes),
                                            "smallest size: bytes, or with K/M/G")(
      "max-bytes,e", po::value(&max_bytes)->default_value(max_bytes), "largest size")(
      "factor,f", po::value(&factor)->default_value(factor), "size multiplier between rows (>= 2)")(
      "iters,n", po::value(&o.iters)->default_value(o.iters), "timed all-reduces per size and variant")(
      "warmup,w", po::value(&o.warmup)->default_value(o.warmup), "untimed all-reduces before them")(
      "device", po::value(&o.device)->default_value(o.device), "cpu (MPI) or cuda (NCCL, one GPU per rank)")(
      "markdown", po::bool_switch(&o.markdown), "print the table as Markdown");
  po::variables_map vm;
  try {
    // No positional arguments: a stray word is an error, not ignored.
    po::store(po::command_line_parser(argc, argv).options(desc).positional({}).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw Error(std::string(e.what()) + " (see --help)");
  }
  std::ostringstream help;
  help << desc;
  out.help_text = help.str();
  out.show_help = vm.count("help") > 0;
  if (out.show_help) return out;

  o.min_bytes = parse_size_bytes(min_bytes, "--min-bytes");
  o.max_bytes = parse_size_bytes(max_bytes, "--max-bytes");
  // A whole number of FP32 elements, so the MPI_FLOAT reference moves exactly
  // the same bytes; factor >= 2 keeps every later size a multiple of 4 too.
  if (o.min_bytes % 4 != 0) throw Error("--min-bytes must be a multiple of 4 (whole FP32 elements)");
  if (o.max_bytes < o.min_bytes) throw Error("--max-bytes must be >= --min-bytes");
  if (factor < 2) throw Error("--factor must be >= 2");
  o.factor = static_cast<size_t>(factor);
  if (o.iters < 1) throw Error("--iters must be >= 1");
  if (o.warmup < 0) throw Error("--warmup must be >= 0");
  if (o.device != "cpu" && o.device != "cuda") throw Error("--device: '" + o.device + "' is not one of cpu, cuda");
  return out;
}

std::vector<size_t> allreduce_bench_sizes(const AllreduceBenchOptions& options) {
  std::vector<size_t> sizes;
  for (size_t s = options.min_bytes; s <= options.max_bytes; s *= options.factor) {
    sizes.push_back(s);
    if (s > options.max_bytes / options.factor) break;  // the next one would pass max (or overflow)
  }
  return sizes;
}

double allreduce_bus_factor(int world_size) { return world_size > 1 ? 2.0 * (world_size - 1) / world_size : 0.0; }

// The largest sum is at most N(P-1) + N(P-1); FP16 holds every integer up to
// 2048 exactly. 16 for up to 68 ranks; a world of over 1024 gets period 1
// (all zeros), where the check only sees gross corruption.
int allreduce_check_period(int world_size) {
  for (int period : {16, 8, 4, 2})
    if (2 * static_cast<int64_t>(world_size) * (period - 1) <= 2048) return period;
  return 1;
}

lowp16 allreduce_fill_value(size_t index, int rank, int world_size) {
  const int p = allreduce_check_period(world_size);
  return to_half(static_cast<float>(static_cast<int>(index % p) + rank % p));
}

lowp16 allreduce_expected_sum(size_t index, int world_size) {
  const int p = allreduce_check_period(world_size);
  int64_t ranks_part = 0;
  for (int r = 0; r < world_size; ++r) ranks_part += r % p;
  return to_half(static_cast<float>(static_cast<int64_t>(world_size) * static_cast<int>(index % p) + ranks_part));
}

void fill_allreduce_pattern(lowp16* data, size_t count_fp16, int rank, int world_size) {
  const int p = allreduce_check_period(world_size);
  lowp16 table[16];
  for (int j = 0; j < p; ++j) table[j] = allreduce_fill_value(j, rank, world_size);
  for (size_t i = 0; i < count_fp16; ++i) data[i] = table[i % p];
}

int64_t count_allreduce_wrong(const lowp16* data, size_t count_fp16, int world_size) {
  const int p = allreduce_check_period(world_size);
  uint16_t table[16];
  for (int j = 0; j < p; ++j) table[j] = allreduce_expected_sum(j, world_size).bits;
  int64_t wrong = 0;
  for (size_t i = 0; i < count_fp16; ++i) wrong += data[i].bits != table[i % p];
  return wrong;
}

namespace {
std::string fixed(double value, int decimals) {
  char text[32];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}
// Microseconds with 1 decimal below 100 us, whole ones above.
std::string micros(double seconds) { return seconds < 0 ? "-" : fixed(seconds * 1e6, seconds < 1e-4 ? 1 : 0); }
std::string gbps(size_t bytes, double seconds, double factor) {
  return seconds <= 0 ? "-" : fixed(static_cast<double>(bytes) / seconds * 1e-9 * factor, 2);
}
}  // namespace

std::string allreduce_table_header(bool markdown) {
  if (markdown)
    return "| size (B) | count (FP16) | ours time (us) | ours algbw (GB/s) | ours busbw (GB/s) "
           "| MPI float time (us) | MPI float busbw (GB/s) | MPI short busbw (GB/s) | ours / MPI float busbw "
           "| #wrong |\n"
           "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  char text[512];
  std::snprintf(text, sizeof text,
                "#%11s %11s | %10s %7s %7s | %10s %7s | %7s | %6s | %6s\n"
                "#%11s %11s | %10s %7s %7s | %10s %7s | %7s | %6s | %6s\n",
                "size", "count", "ours time", "algbw", "busbw", "MPI float", "busbw", "short", "ours/", "#wrong", "(B)",
                "(fp16)", "(us)", "(GB/s)", "(GB/s)", "time (us)", "(GB/s)", "busbw", "float", "");
  std::string header = text;
  for (size_t nl; (nl = header.find(" \n")) != std::string::npos;) header.erase(nl, 1);  // no trailing blanks
  return header;
}

std::string allreduce_table_row(const AllreduceBenchRow& row, int world_size, bool markdown) {
  const double bus = allreduce_bus_factor(world_size);
  const std::string size = std::to_string(row.size_bytes), count = std::to_string(row.size_bytes / 2);
  const std::string ours_time = micros(row.ours_s), ours_alg = gbps(row.size_bytes, row.ours_s, 1.0),
                    ours_bus = gbps(row.size_bytes, row.ours_s, bus), float_time = micros(row.mpi_float_s),
                    float_bus = gbps(row.size_bytes, row.mpi_float_s, bus),
                    short_bus = gbps(row.size_bytes, row.mpi_short_s, bus),
                    ratio = row.mpi_float_s > 0 && row.ours_s > 0 ? fixed(row.mpi_float_s / row.ours_s, 2) : "-",
                    wrong = std::to_string(row.wrong);
  if (markdown)
    return "| " + size + " | " + count + " | " + ours_time + " | " + ours_alg + " | " + ours_bus + " | " + float_time +
           " | " + float_bus + " | " + short_bus + " | " + ratio + " | " + wrong + " |\n";
  char text[512];
  std::snprintf(text, sizeof text, " %11s %11s | %10s %7s %7s | %10s %7s | %7s | %6s | %6s\n", size.c_str(),
                count.c_str(), ours_time.c_str(), ours_alg.c_str(), ours_bus.c_str(), float_time.c_str(),
                float_bus.c_str(), short_bus.c_str(), ratio.c_str(), wrong.c_str());
  return text;
}

}  // namespace ddp
