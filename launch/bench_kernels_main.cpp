// bench_kernels_main.cpp: FP16 GEMM rate of our backends next to a reference
// on the same shapes: on CPU the BLAS's own SGEMM (what our FP16 GEMM wraps,
// so the ratio is the cost of FP16 widening/rounding), on a GPU cuBLAS's own
// FP16 GemmEx (so the ratio is cuBLASLt-with-our-epilogues vs plain cuBLAS).
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "kernels/buffer.h"
#include "kernels/ops/gemm.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/device_query.h"
#if defined(DDP_HAVE_CUDA)
#include "kernels/cuda/cuda_backend.h"
#include "launch/bench/cuda_bench_gemm.h"
#endif

namespace {
using Clock = std::chrono::steady_clock;

struct Shape {
  int m, n, k;
};

// Median seconds per call of fn over `reps` timed calls after one warm-up.
template <class F>
double median_seconds(F&& fn, int reps) {
  fn();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = Clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
  return t[t.size() / 2];
}

double gflops(const Shape& s, double seconds) { return 2.0 * s.m * s.n * s.k / seconds * 1e-9; }

// Median over reps of (calls back-to-back GEMMs, then one synchronize) /
// calls. On a GPU, calls > 1 keeps launch and sync latency out of the
// figure, as the cuBLAS reference's event timing of back-to-back calls does.
void bench_backend(ddp::Backend& backend, const Shape& s, int reps, int calls, double* seconds) {
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<ddp::lowp16> a(static_cast<size_t>(s.m) * s.k), b(static_cast<size_t>(s.k) * s.n);
  for (auto& x : a) x = ddp::to_half(u(rng));
  for (auto& x : b) x = ddp::to_half(u(rng));
  ddp::Buffer<ddp::lowp16> da(backend, a.size()), db(backend, b.size()), dc(backend, static_cast<size_t>(s.m) * s.n);
  da.upload(a);
  db.upload(b);
  ddp::GemmLowp g;
  g.m = s.m;
  g.n = s.n;
  g.k = s.k;
  g.a = da.data();
  g.lda = s.k;
  g.b = db.data();
  g.ldb = s.n;
  g.c = dc.data();
  g.ldc = s.n;
  gemm_lowp(backend, g);
  backend.synchronize();  // plan creation stays out of the timing
  *seconds = median_seconds(
                 [&] {
                   for (int i = 0; i < calls; ++i) gemm_lowp(backend, g);
                   backend.synchronize();
                 },
                 reps) /
             calls;
}
}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 5;
  const std::vector<Shape> shapes = {{128, 512, 784}, {256, 1024, 1024}, {512, 2048, 2048}, {1024, 4096, 4096}};
  ddp::CpuBackend cpu;
  std::printf("CPU: %s\n", cpu.description().c_str());
  std::printf("%-18s %14s %14s %8s\n", "shape m,n,k", "ours GFLOP/s", "sgemm GFLOP/s", "ratio");
  for (const Shape& s : shapes) {
    double ours = 0;
    bench_backend(cpu, s, reps, 1, &ours);
    std::vector<float> a(static_cast<size_t>(s.m) * s.k, 0.5f), b(static_cast<size_t>(s.k) * s.n, 0.25f),
        c(static_cast<size_t>(s.m) * s.n);
    const double ref = median_seconds(
        [&] {
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.m, s.n, s.k, 1.0f, a.data(), s.k, b.data(), s.n,
                      0.0f, c.data(), s.n);
        },
        reps);
    char name[32];
    std::snprintf(name, sizeof name, "%d,%d,%d", s.m, s.n, s.k);
    std::printf("%-18s %14.1f %14.1f %8.2f\n", name, gflops(s, ours), gflops(s, ref), ref / ours);
  }
  std::string why;
  if (ddp::visible_cuda_devices(&why) == 0) {
    std::printf("GPU: none (%s)\n", why.c_str());
    return 0;
  }
#if defined(DDP_HAVE_CUDA)
  ddp::CudaBackend gpu(0);
  std::printf("GPU: %s\n", gpu.description().c_str());
  std::printf("%-18s %14s %14s %8s\n", "shape m,n,k", "ours TFLOP/s", "cuBLAS TFLOP/s", "ratio");
  std::vector<Shape> gpu_shapes = shapes;
  gpu_shapes.push_back({4096, 4096, 4096});  // the wide reference model's layers at batch 4096
  for (const Shape& s : gpu_shapes) {
    double ours = 0;
    bench_backend(gpu, s, reps, 20, &ours);
    const double ref = ddp::cublas_gemm_ex_fp16_tflops(s.m, s.n, s.k, reps * 10);
    char name[32];
    std::snprintf(name, sizeof name, "%d,%d,%d", s.m, s.n, s.k);
    std::printf("%-18s %14.1f %14.1f %8.2f\n", name, gflops(s, ours) / 1000, ref, gflops(s, ours) / 1000 / ref);
  }
#endif
  return 0;
}
