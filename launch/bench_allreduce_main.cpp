// bench_allreduce_main.cpp: the `bench_allreduce` entry point, an all-reduce
// benchmark in the style of nccl-tests' all_reduce_perf.
//
//   launch/allreduce_bench.h     flags, sizes, algbw/busbw, check values, the table
//   comm/mpi_environment.h       rank, world, local rank (= GPU), host
//   comm/mpi_communicator.h      ours on CPU ranks (MPI user-defined FP16 sum)
//   comm/nccl_communicator.h     ours on GPU ranks (ncclAllReduce, ncclFloat16)
//   launch/device_select.h       --device cuda -> CudaBackend on the local rank's GPU
//
// For every size: ours (warm-up, barrier, timed loop, then one checked call
// on freshly filled buffers), then on CPU the two plain MPI_Allreduce
// references on the same bytes. All in place, all on MPI_COMM_WORLD.
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/mpi_check.h"
#include "comm/mpi_communicator.h"
#include "comm/mpi_environment.h"
#include "kernels/backend.h"
#include "kernels/error.h"
#include "launch/bench/allreduce_bench.h"
#if defined(DDP_HAVE_NCCL)
#include "comm/nccl_communicator.h"
#include "kernels/buffer.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "launch/cli/device_select.h"
#endif

namespace {

// Each rank's mean seconds per call of `run` over `iters` calls, after
// `warmup` untimed ones and a barrier; the max over ranks (the job's pace is
// the slowest rank's). `wait` returns once the calls so far are complete
// (a device's queue drained; nothing to do for host-synchronous MPI).
template <class Run, class Wait, class Barrier>
double time_per_call(int warmup, int iters, Run&& run, Wait&& wait, Barrier&& barrier) {
  for (int i = 0; i < warmup; ++i) run();
  wait();
  barrier();
  const double start = MPI_Wtime();
  for (int i = 0; i < iters; ++i) run();
  wait();
  const double mean_s = (MPI_Wtime() - start) / iters;
  double max_mean_s = 0.0;
  DDP_MPI_CHECK(MPI_Allreduce(&mean_s, &max_mean_s, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
  return max_mean_s;
}

// Plain in-place MPI_Allreduce(MPI_SUM) of `count` elements of `type`, in
// chunks whose element count fits MPI's int (as the communicator does).
void mpi_sum_in_place(void* data, size_t count, MPI_Datatype type, size_t element_bytes) {
  constexpr size_t kMaxChunk = static_cast<size_t>(INT_MAX) / 2;
  char* bytes = static_cast<char*>(data);
  for (size_t off = 0; off < count; off += kMaxChunk) {
    const int n = static_cast<int>(std::min(kMaxChunk, count - off));
    DDP_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, bytes + off * element_bytes, n, type, MPI_SUM, MPI_COMM_WORLD));
  }
}

// The MPI references get the check's pattern too, as FP32 / int16 values:
// ordinary numbers (no denormals, which would slow FP32 adds down) that stay
// finite for dozens of iterations.
template <class T>
void fill_reference(T* data, size_t count, int rank, int world_size) {
  const int p = ddp::allreduce_check_period(world_size);
  for (size_t i = 0; i < count; ++i) data[i] = static_cast<T>(static_cast<int>(i % p) + rank % p);
}

// Host memory for every variant: page-aligned, max_bytes once.
struct FreeDeleter {
  void operator()(void* p) const noexcept { std::free(p); }
};
std::unique_ptr<void, FreeDeleter> allocate_host(size_t size_bytes) {
  constexpr size_t kPage = 4096;
  void* p = std::aligned_alloc(kPage, (size_bytes + kPage - 1) / kPage * kPage);
  if (p == nullptr) throw ddp::Error("cannot allocate " + std::to_string(size_bytes) + " bytes of host memory");
  return std::unique_ptr<void, FreeDeleter>(p);
}

// Our communicator's all-reduce on its own kind of memory: fill with the
// check's pattern, run once (queued, on a device), wait, count wrong elements.
class OursTarget {
 public:
  virtual ~OursTarget() = default;
  virtual ddp::Communicator& comm() = 0;
  virtual void fill(size_t count_fp16) = 0;
  virtual void run(size_t count_fp16) = 0;
  virtual void wait() = 0;
  virtual int64_t wrong(size_t count_fp16) = 0;
};

class HostTarget final : public OursTarget {
 public:
  HostTarget(ddp::lowp16* data, int rank, int world_size) : data_(data), rank_(rank), world_size_(world_size) {}
  ddp::Communicator& comm() override { return comm_; }
  void fill(size_t count_fp16) override { ddp::fill_allreduce_pattern(data_, count_fp16, rank_, world_size_); }
  void run(size_t count_fp16) override { comm_.allreduce_sum_lowp(data_, count_fp16); }
  void wait() override {}  // the call returns with the sum done
  int64_t wrong(size_t count_fp16) override { return ddp::count_allreduce_wrong(data_, count_fp16, world_size_); }

 private:
  ddp::MpiCommunicator comm_;
  ddp::lowp16* data_;
  int rank_, world_size_;
};

#if defined(DDP_HAVE_NCCL)
class CudaTarget final : public OursTarget {
 public:
  CudaTarget(ddp::CudaBackend& gpu, size_t max_count_fp16, ddp::lowp16* host_staging, int rank, int world_size)
      : gpu_(gpu),
        comm_(rank, world_size, gpu.compute_stream()),
        data_(gpu, max_count_fp16),
        host_(host_staging),
        rank_(rank),
        world_size_(world_size) {}
  ddp::Communicator& comm() override { return comm_; }
  void fill(size_t count_fp16) override {
    ddp::fill_allreduce_pattern(host_, count_fp16, rank_, world_size_);
    data_.upload(host_, count_fp16);
  }
  void run(size_t count_fp16) override { comm_.allreduce_sum_lowp(data_.data(), count_fp16); }
  // The compute stream waits for the collective; the comm stream is synced
  // too, so nothing queued is left whatever the event plumbing.
  void wait() override {
    gpu_.synchronize();
    DDP_CUDA_CHECK(cudaStreamSynchronize(comm_.comm_stream()));
  }
  int64_t wrong(size_t count_fp16) override {
    gpu_.copy_to_host(host_, data_.data(), count_fp16 * sizeof(ddp::lowp16));
    return ddp::count_allreduce_wrong(host_, count_fp16, world_size_);
  }

 private:
  ddp::CudaBackend& gpu_;
  ddp::NcclCommunicator comm_;
  ddp::Buffer<ddp::lowp16> data_;
  ddp::lowp16* host_;
  int rank_, world_size_;
};
#endif

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
  int len = 0;
  if (MPI_Get_library_version(text, &len) != MPI_SUCCESS) return "unknown";
  std::string version(text, len);
  return version.substr(0, version.find(','));  // "Open MPI v4.1.4"
}

std::string human_size(size_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  double v = static_cast<double>(bytes);
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char text[32];
  std::snprintf(text, sizeof text, "%g %s", v, units[u]);
  return text;
}

int run_bench(const ddp::MpiEnvironment& env, const ddp::AllreduceBenchOptions& opts) {
  const int rank = env.rank(), world = env.world_size();
  const bool cpu = opts.device == "cpu";
  const std::vector<size_t> sizes = ddp::allreduce_bench_sizes(opts);
  const size_t max_bytes = sizes.back();
  // Host memory: the CPU buffer, or the GPU's fill/check staging area.
  auto host = allocate_host(max_bytes);
  auto* host_fp16 = static_cast<ddp::lowp16*>(host.get());

  std::unique_ptr<ddp::Backend> gpu_backend;
  std::unique_ptr<OursTarget> ours;
  if (cpu) {
    ours = std::make_unique<HostTarget>(host_fp16, rank, world);
  } else {
#if defined(DDP_HAVE_NCCL)
    // select_device checks that no host runs more ranks than it has GPUs.
    ddp::DeviceChoice choice = ddp::select_device("cuda", env.local_rank(), env.local_size(), 0, env.host());
    auto* gpu = dynamic_cast<ddp::CudaBackend*>(choice.backend.get());
    DDP_REQUIRE(gpu != nullptr, "--device cuda did not give a CUDA backend");
    gpu_backend = std::move(choice.backend);
    ours = std::make_unique<CudaTarget>(*gpu, max_bytes / 2, host_fp16, rank, world);
#else
    throw ddp::Error(
        "--device cuda needs a build with CUDA and NCCL (see the 'ddp_train: NCCL' line of the CMake "
        "configure); use --device cpu");
#endif
  }

  int hosts = 0;
  const int first_on_host = env.local_rank() == 0;
  DDP_MPI_CHECK(MPI_Allreduce(&first_on_host, &hosts, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  if (rank == 0) {
    std::printf(
        "# bench_allreduce: %d rank(s) on %d host(s), device %s, in place, %d timed iterations after %d "
        "warm-up, time = max over ranks of the mean per iteration\n",
        world, hosts, opts.device.c_str(), opts.iters, opts.warmup);
    std::printf("# ours: %s allreduce_sum_lowp (count = bytes/2)%s\n", ours->comm().name().c_str(),
                cpu ? "; references: MPI_Allreduce MPI_SUM of MPI_FLOAT (bytes/4) and MPI_SHORT (bytes/2)"
                    : "; no MPI references on device memory");
    std::printf("# MPI: %s; busbw = algbw * %.3f (2(N-1)/N); GB/s = 1e9 B/s\n#\n", mpi_library_version().c_str(),
                ddp::allreduce_bus_factor(world));
    std::printf("%s", ddp::allreduce_table_header(opts.markdown).c_str());
    std::fflush(stdout);
  }

  const auto mpi_barrier = [] { DDP_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD)); };
  const auto nothing = [] {};
  int64_t wrong_total = 0;
  std::vector<double> ratios_from_1mib;
  double previous_size_s = 0.0;
  for (size_t k = 0; k < sizes.size(); ++k) {
    const size_t size_bytes = sizes[k], count_fp16 = size_bytes / 2;
    const double size_start = MPI_Wtime();
    if (rank == 0 && previous_size_s * opts.factor > 2.0) {
      std::fprintf(stderr, "bench_allreduce: size %zu/%zu (%s), about %.0f s\n", k + 1, sizes.size(),
                   human_size(size_bytes).c_str(), previous_size_s * opts.factor);
      std::fflush(stderr);
    }
    ddp::AllreduceBenchRow row;
    row.size_bytes = size_bytes;

    // Ours. In place, so the timed loop keeps summing its own results (FP16
    // values overflow to Inf, which costs nothing extra); the check re-fills.
    ours->fill(count_fp16);
    row.ours_s = time_per_call(
        opts.warmup, opts.iters, [&] { ours->run(count_fp16); }, [&] { ours->wait(); },
        [&] { ours->comm().barrier(); });
    ours->fill(count_fp16);
    ours->run(count_fp16);
    ours->wait();
    const int64_t wrong_here = ours->wrong(count_fp16);
    DDP_MPI_CHECK(MPI_Allreduce(&wrong_here, &row.wrong, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD));
    wrong_total += row.wrong;
    ours->comm().take_allreduce_times();  // drains a device's per-call timing events

    if (cpu) {
      float* host_fp32 = static_cast<float*>(host.get());
      fill_reference(host_fp32, size_bytes / 4, rank, world);
      row.mpi_float_s = time_per_call(
          opts.warmup, opts.iters, [&] { mpi_sum_in_place(host_fp32, size_bytes / 4, MPI_FLOAT, 4); }, nothing,
          mpi_barrier);
      int16_t* host_i16 = static_cast<int16_t*>(host.get());
      fill_reference(host_i16, size_bytes / 2, rank, world);
      row.mpi_short_s = time_per_call(
          opts.warmup, opts.iters, [&] { mpi_sum_in_place(host_i16, size_bytes / 2, MPI_SHORT, 2); }, nothing,
          mpi_barrier);
      if (size_bytes >= (size_t{1} << 20)) ratios_from_1mib.push_back(row.mpi_float_s / row.ours_s);
    }
    if (rank == 0) {
      std::printf("%s", ddp::allreduce_table_row(row, world, opts.markdown).c_str());
      std::fflush(stdout);
    }
    previous_size_s = MPI_Wtime() - size_start;
  }

  if (rank == 0) {
    const char* lead = opts.markdown ? "\n" : "";
    if (!ratios_from_1mib.empty()) {
      double log_sum = 0.0;
      for (double r : ratios_from_1mib) log_sum += std::log(r);
      std::printf("%s# sizes >= 1 MiB: ours / MPI float busbw min %.2f, geometric mean %.2f\n", lead,
                  *std::min_element(ratios_from_1mib.begin(), ratios_from_1mib.end()),
                  std::exp(log_sum / ratios_from_1mib.size()));
      lead = "";
    }
    std::printf("%s# wrong elements: %lld (%s)\n", lead, static_cast<long long>(wrong_total),
                wrong_total == 0 ? "OK" : "FAILED");
    std::fflush(stdout);
  }
  return wrong_total == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::unique_ptr<ddp::MpiEnvironment> env;
  try {
    env = std::make_unique<ddp::MpiEnvironment>(&argc, &argv);
    ddp::ParsedAllreduceBenchOptions parsed;
    try {
      parsed = ddp::parse_allreduce_bench_options(argc, argv);
    } catch (const ddp::Error& e) {
      // Every rank parses the same flags and fails alike: rank 0 says so
      // once, and all exit without MPI_Abort's banner.
      if (env->rank() == 0) std::fprintf(stderr, "bench_allreduce: error: %s\n", e.what());
      return 2;
    }
    if (parsed.show_help) {
      if (env->rank() == 0) std::printf("%s", parsed.help_text.c_str());
      return 0;
    }
    return run_bench(*env, parsed.options);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    const int rank = env ? env->rank() : 0;
    const std::string host = env ? env->host() : "?";
    std::fprintf(stderr, "bench_allreduce: error (rank %d on %s): %s\n", rank, host.c_str(), e.what());
    std::fflush(stderr);
    // A failing rank ends the job, so no peer is left waiting in a collective.
    if (env && env->world_size() > 1) env->abort_job(1);
    return 1;
  }
}
