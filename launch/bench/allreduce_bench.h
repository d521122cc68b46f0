// allreduce_bench.h: the parts of `bench_allreduce` that need no MPI and no
// GPU: its command line, the sizes it sweeps, the nccl-tests bandwidth
// arithmetic, the closed-form fill/expected values of the correctness check,
// and the table it prints. The collectives themselves are timed in
// launch/bench_allreduce_main.cpp.
//
// Bandwidths follow nccl-tests (doc/PERFORMANCE.md there): algbw = size_bytes /
// time; busbw = algbw * 2(N-1)/N for an all-reduce, the bandwidth each rank's
// link carries in an optimal ring, so figures compare across rank counts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/half.h"

namespace ddp {

struct AllreduceBenchOptions {
  size_t min_bytes = size_t{4} << 10;  // each size is a whole number of FP32 elements
  size_t max_bytes = size_t{256} << 20;
  size_t factor = 2;           // size_bytes *= factor up to max_bytes
  int iters = 20;              // timed all-reduces per size and variant
  int warmup = 5;              // untimed ones before them
  std::string device = "cpu";  // cpu: MPI; cuda: NCCL, GPU = local rank
  bool markdown = false;       // the table as Markdown instead of text
};

struct ParsedAllreduceBenchOptions {
  AllreduceBenchOptions options;
  bool show_help = false;
  std::string help_text;
};

// Throws ddp::Error with one line naming the flag on anything malformed.
ParsedAllreduceBenchOptions parse_allreduce_bench_options(int argc, const char* const argv[]);

// "4096", "4K", "256M", "1G" (binary multiples, case-insensitive) -> bytes;
// throws ddp::Error naming `flag` on anything else or on 0.
size_t parse_size_bytes(const std::string& text, const std::string& flag);

// min, min*factor, ... while <= max.
std::vector<size_t> allreduce_bench_sizes(const AllreduceBenchOptions& options);

// 2(N-1)/N: busbw / algbw of an all-reduce over N ranks (0 for one rank).
double allreduce_bus_factor(int world_size);

// The check's values. Rank r holds (i % P) + (r % P) at element i, P the
// pattern period below, so every partial sum in any reduction order is an
// integer no larger than the final one and is exact in FP16 (and in FP32 and
// int16): the expected result is the closed form, bit for bit.
int allreduce_check_period(int world_size);  // 16, or less for large worlds
lowp16 allreduce_fill_value(size_t index, int rank, int world_size);
lowp16 allreduce_expected_sum(size_t index, int world_size);

// rank's pattern into data[0, count_fp16); a table lookup per element, so
// 256 MB take a fraction of a second.
void fill_allreduce_pattern(lowp16* data, size_t count_fp16, int rank, int world_size);
// Elements of data[0, count_fp16) that differ (bitwise) from the expected sum.
int64_t count_allreduce_wrong(const lowp16* data, size_t count_fp16, int world_size);

// One table row. Times are seconds per all-reduce, the max over ranks of each
// rank's mean; a reference time < 0 means "not measured" (printed as -).
struct AllreduceBenchRow {
  size_t size_bytes = 0;
  double ours_s = 0.0;
  double mpi_float_s = -1.0;  // MPI_Allreduce, MPI_FLOAT sum, size_bytes / 4 elements
  double mpi_short_s = -1.0;  // MPI_Allreduce, MPI_SHORT sum, size_bytes / 2 elements
  int64_t wrong = 0;          // elements wrong after our all-reduce, summed over ranks
};

std::string allreduce_table_header(bool markdown);
std::string allreduce_table_row(const AllreduceBenchRow& row, int world_size, bool markdown);

}  // namespace ddp
