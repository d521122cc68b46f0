// upload_slots.h: two fixed slots through which the host streams batches to
// the device one batch ahead of the compute stream (double buffering).
//
// A slot is a pinned host staging area and a device area of slot_bytes()
// each. The producer (the trainer's batch loader) fills a slot with
//   begin_fill(s) -> host pointer, writes it, copy(s, ...) per byte range,
//   end_fill(s)
// and the consumer, before queuing compute work that reads device_slot(s),
// calls wait_filled(s); when it moves on to the other slot it calls
// release(s). Who waits on what (CUDA; on the CPU every call is synchronous
// in call order and the waits are trivially met):
//   (a) the compute stream waits for the slot's copies (wait_filled: an
//       event recorded on the copy stream by end_fill), so it never reads a
//       batch that has not arrived;
//   (b) the copies into a slot wait for the compute stream to finish the
//       work queued before the slot's last release() (begin_fill makes the
//       copy stream wait on that event), so a batch in use is never
//       overwritten by the one two batches later;
//   (c) begin_fill blocks the host until the last copy out of the slot's
//       staging has finished before handing it out for writing. That copy
//       was queued a batch ago, so in steady state the wait is already met.
// No host synchronisation with the compute stream anywhere: only events.
//
// CUDA graphs: device_slot(s) is the same address for the life of the
// object. The copies run on their own stream and are queued by the host
// between steps, outside any capture; the trainer's captured step reads its
// batch from its own input buffers, filled from the slot after
// wait_filled(s) and before release(s) (trainer/loop/captured_step.cpp,
// CapturedStep::replay), so one capture serves both slots on every rank
// alike.
#pragma once

#include <cstddef>

namespace ddp {

class UploadSlots {
 public:
  static constexpr int kSlotCount = 2;

  virtual ~UploadSlots() = default;
  virtual size_t slot_bytes() const = 0;

  // Device memory of `slot` (slot_bytes() of it); fixed for the life of the
  // object.
  virtual void* device_slot(int slot) = 0;
  // The host staging of `slot` (pinned on CUDA), once the last copy out of
  // it has finished (c). The copy stream is ordered after the slot's last
  // release() (b).
  // A fill gives up the slot's previous batch: the staging may be the
  // slot's own memory where the device is the host (CpuUploadSlots).
  virtual void* begin_fill(int slot) = 0;
  // Queues the copy of staging bytes [offset_bytes, offset_bytes +
  // size_bytes) to the same bytes of device_slot(slot). Only between
  // begin_fill and end_fill; the staging must not change until the next
  // begin_fill of the slot.
  virtual void copy(int slot, size_t offset_bytes, size_t size_bytes) = 0;
  // Marks the slot's copies queued since begin_fill as one batch.
  virtual void end_fill(int slot) = 0;

  // Orders the compute stream after the slot's last end_fill (a).
  virtual void wait_filled(int slot) = 0;
  // The compute work queued so far is the last to read the slot's current
  // contents; the next fill's copies wait for it (b).
  virtual void release(int slot) = 0;
};

}  // namespace ddp
