// async_checkpoint_writer.h: --async-checkpoint's writer: one checkpoint
// write at a time on a thread of its own, so that training goes on while
// the file is serialised, written, synced and renamed, and older ones are
// pruned. The caller takes the state to host memory first (a collective
// at --zero) and hands the write over as a function that owns its copy.
//
// At most one write is in flight: the caller waits for it before the next
// checkpoint, at the end of the run and on a stop, so the files appear in
// step order and pruning sees them as the synchronous path would. A write
// that fails is rethrown on the caller's thread, at the poll or wait that
// collects it, as one line naming the step.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <thread>

namespace ddp {

class AsyncCheckpointWriter {
 public:
  // A write collected from the thread.
  struct Finished {
    int64_t step = 0;
    double write_s = 0.0;  // the thread's time for it, from start to end
  };

  AsyncCheckpointWriter() = default;
  // Waits for a write in flight: the file is then whole, or its temporary
  // file removed (a run that ends by an exception still keeps the
  // checkpoint it had started). Its error, if any, is dropped: the run is
  // already ending with another.
  ~AsyncCheckpointWriter();
  AsyncCheckpointWriter(const AsyncCheckpointWriter&) = delete;
  AsyncCheckpointWriter& operator=(const AsyncCheckpointWriter&) = delete;

  // Runs `write`, the checkpoint of `step`, on a new thread with SIGINT,
  // SIGTERM and SIGUSR1 blocked there, so a stop request reaches the training thread
  // as it does without this writer (stop_signal.h). A write must not be in
  // flight (wait() first): ddp::Error otherwise.
  void start(int64_t step, std::function<void()> write);
  bool in_flight() const { return thread_.joinable(); }

  // Never blocks: the write in flight once it has finished (collected as by
  // wait()), otherwise nothing.
  std::optional<Finished> poll();
  // Blocks until the write in flight has finished and collects it; nothing
  // when none was in flight. A write that threw is rethrown here as
  // ddp::Error: "the checkpoint of step S, written in the background
  // (--async-checkpoint), failed: <its message>".
  std::optional<Finished> wait();

 private:
  void run(const std::function<void()>& write);

  std::thread thread_;
  std::atomic<bool> done_{false};  // set by the thread as its last act
  // Written by the thread before done_, read after the join.
  int64_t step_ = 0;
  double write_s_ = 0.0;
  std::optional<std::string> error_;
};

}  // namespace ddp
