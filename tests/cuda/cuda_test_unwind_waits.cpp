// cuda_test_unwind_waits.cpp: while an exception unwinds after a CUDA graph
// was launched, the CUDA backend's destructors and frees (Buffer, upload
// slots, the backend itself) must not wait for the device
// (CudaBackend::skips_device_waits): a replay may hold collectives whose
// peer is gone, and a wait there would keep the error from reaching main.
// The stand-in for such a replay is a captured host node that holds the
// compute stream until the test lets it go (a helper thread lets it go after
// a few seconds in any case, so a wrong destructor fails the test instead of
// hanging it). Outside unwinding the same frees still wait.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include <cuda_runtime.h>

#include "kernels/buffer.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/upload_slots.h"
#include "support/gpu_test.h"

namespace ddp {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// The captured host node: returns once *held is false.
void CUDART_CB hold_while_set(void* held) {
  auto* flag = static_cast<std::atomic<bool>*>(held);
  while (flag->load()) std::this_thread::sleep_for(1ms);
}

// Clears the flag after `after`, or at once when destroyed earlier: the
// host node never holds the device past the test.
class LetGoAfter {
 public:
  LetGoAfter(std::atomic<bool>& held, std::chrono::milliseconds after)
      : held_(held), thread_([this, after] {
          const auto until = Clock::now() + after;
          while (!done_.load() && Clock::now() < until) std::this_thread::sleep_for(1ms);
          held_ = false;
        }) {}
  ~LetGoAfter() {
    done_ = true;
    thread_.join();
  }

 private:
  std::atomic<bool>& held_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Outlives every graph launch below (the host node reads it).
std::atomic<bool> g_held{false};

// Skips where no GPU is visible.
class CudaUnwindWaits : public test::GpuTest {};

TEST_F(CudaUnwindWaits, DestructorsSkipTheirWaitsForAStuckReplayWhileUnwinding) {
  auto gpu = std::make_unique<CudaBackend>(0);
  // Made before the replays: nothing below allocates while the stream is held.
  auto doomed_buffer = std::make_unique<Buffer<float>>(*gpu, 1024);
  auto freed_buffer = std::make_unique<Buffer<float>>(*gpu, 1024);
  auto graph_buffer = std::make_unique<Buffer<float>>(*gpu, 1024);  // the graph writes it: lives as long as gpu
  std::unique_ptr<UploadSlots> slots = gpu->make_upload_slots(4096);
  static_cast<void>(slots->begin_fill(0));
  slots->copy(0, 0, 4096);
  slots->end_fill(0);
  slots->wait_filled(0);
  slots->release(0);

  gpu->begin_capture();
  DDP_CUDA_CHECK(cudaLaunchHostFunc(gpu->compute_stream(), hold_while_set, &g_held));
  gpu->fill_zero(graph_buffer->data(), graph_buffer->size_bytes());
  const int graph = gpu->end_capture();

  // Unwinding: the buffer and the slots go at once.
  g_held = true;
  gpu->replay(graph);
  {
    LetGoAfter safety(g_held, 3000ms);
    const auto start = Clock::now();
    try {
      std::unique_ptr<Buffer<float>> buffer = std::move(doomed_buffer);
      std::unique_ptr<UploadSlots> upload_slots = std::move(slots);
      throw std::runtime_error("a peer failed");
    } catch (const std::runtime_error&) {
    }
    EXPECT_LT(seconds_since(start), 1.0) << "a destructor waited for the held replay while unwinding";
  }
  gpu->synchronize();

  // Not unwinding: a free still waits for the replay that may use the memory.
  g_held = true;
  gpu->replay(graph);
  {
    LetGoAfter release(g_held, 300ms);
    const auto start = Clock::now();
    freed_buffer.reset();
    EXPECT_GE(seconds_since(start), 0.25) << "a free did not wait for the replay";
  }
  gpu->synchronize();

  // The backend itself, unwinding.
  g_held = true;
  gpu->replay(graph);
  {
    LetGoAfter safety(g_held, 3000ms);
    const auto start = Clock::now();
    try {
      std::unique_ptr<CudaBackend> backend = std::move(gpu);
      std::unique_ptr<Buffer<float>> buffer = std::move(graph_buffer);  // goes first, as in main
      throw std::runtime_error("a peer failed");
    } catch (const std::runtime_error&) {
    }
    EXPECT_LT(seconds_since(start), 1.0) << "~CudaBackend waited for the held replay while unwinding";
  }
  DDP_CUDA_CHECK(cudaDeviceSynchronize());  // the last replay ends before g_held could go
}

}  // namespace
}  // namespace ddp
