// async_checkpoint_writer.cpp: the background checkpoint writer
// (async_checkpoint_writer.h).
#include "trainer/checkpoint/async_checkpoint_writer.h"

#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <exception>
#include <utility>

#include "kernels/error.h"

namespace ddp {
namespace {

// Blocks the stop signals on the calling thread while it lives; a thread
// started meanwhile inherits the mask, so it never runs the handler.
class StopSignalsBlocked {
 public:
  StopSignalsBlocked() {
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    sigaddset(&stop_signals, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &stop_signals, &saved_);
  }
  ~StopSignalsBlocked() { pthread_sigmask(SIG_SETMASK, &saved_, nullptr); }
  StopSignalsBlocked(const StopSignalsBlocked&) = delete;
  StopSignalsBlocked& operator=(const StopSignalsBlocked&) = delete;

 private:
  sigset_t saved_;
};

}  // namespace

AsyncCheckpointWriter::~AsyncCheckpointWriter() {
  if (thread_.joinable()) thread_.join();
}

void AsyncCheckpointWriter::start(int64_t step, std::function<void()> write) {
  DDP_REQUIRE(!in_flight(), "a checkpoint write is still in flight: wait() before the next");
  step_ = step;
  write_s_ = 0.0;
  error_.reset();
  done_.store(false, std::memory_order_relaxed);
  const StopSignalsBlocked blocked;
  thread_ = std::thread([this, write = std::move(write)] { run(write); });
}

void AsyncCheckpointWriter::run(const std::function<void()>& write) {
  const auto start = std::chrono::steady_clock::now();
  try {
    write();
  } catch (const std::exception& e) {
    error_ = e.what();
  } catch (...) {
    error_ = "an exception that is not a std::exception";
  }
  write_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  done_.store(true, std::memory_order_release);
}

std::optional<AsyncCheckpointWriter::Finished> AsyncCheckpointWriter::poll() {
  if (!in_flight() || !done_.load(std::memory_order_acquire)) return std::nullopt;
  return wait();
}

std::optional<AsyncCheckpointWriter::Finished> AsyncCheckpointWriter::wait() {
  if (!in_flight()) return std::nullopt;
  thread_.join();
  if (error_)
    throw Error("the checkpoint of step " + std::to_string(step_) +
                ", written in the background (--async-checkpoint), failed: " + *error_);
  return Finished{step_, write_s_};
}

}  // namespace ddp
