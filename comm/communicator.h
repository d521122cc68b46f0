// communicator.h: the collectives the trainer needs, over whatever transport
// the build has (NCCL on GPUs, MPI on CPUs, nothing for a world of one).
// Buffers are the backend's memory, 16-bit words in the communicator's
// precision (lowp_codec.h: FP16 or BF16, the backend's); sums add in FP32
// and round to that precision per step, as NCCL does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "comm/collective_trace.h"
#include "comm/shard_layout.h"
#include "kernels/lowp_codec.h"

namespace ddp {

class Backend;

struct AllreduceTimes {
  double busy_s = 0.0;
  double exposed_s = 0.0;

  AllreduceTimes& operator+=(const AllreduceTimes& o) {
    busy_s += o.busy_s;
    exposed_s += o.exposed_s;
    return *this;
  }
  // The share of the all-reduce time that ran behind backward, in [0, 1].
  double hidden_fraction() const {
    if (!(busy_s > 0.0)) return 0.0;
    const double f = 1.0 - exposed_s / busy_s;
    return f < 0.0 ? 0.0 : (f > 1.0 ? 1.0 : f);
  }
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual std::string name() const = 0;
  // The format its 16-bit sums read and write, fixed when it is made.
  virtual Precision precision() const { return Precision::Fp16; }

  // In place: every rank ends with the element-wise sum over ranks.
  virtual void allreduce_sum_lowp(lowp16* data, size_t count) = 0;
  // In place: rank `root`'s bytes everywhere.
  virtual void broadcast_bytes(void* data, size_t size_bytes, int root) = 0;
  // Host scalars (metrics), summed in double on every rank.
  virtual double allreduce_sum_host(double value) = 0;
  // A host integer's maximum over ranks (flags every rank must agree on).
  virtual int64_t allreduce_max_host(int64_t value) = 0;
  // In place on the backend's memory: every rank ends with the element-wise
  // maximum. For flags that live on the device (the Inf/NaN flag of a
  // sharded step, set on one rank's range only), so a GPU step needs no host
  // round trip; it is ordered after the compute stream's work so far and
  // before its next, like allreduce_sum_lowp.
  virtual void allreduce_max_int32(int32_t* data, size_t count) = 0;
  virtual void barrier() = 0;

  // Shard groups (hybrid sharding, --zero-shard-size G, as FSDP's HSDP and
  // ZeRO++'s hierarchical partitioning): the world is cut into groups of
  // shard_size() consecutive ranks, shard_rank() being this rank's place in
  // its group; the state a group shards is replicated across the groups
  // (the "replicas", world_size() / shard_size() of them). A transport
  // without groups has one: the world.
  virtual int shard_rank() const { return rank(); }
  virtual int shard_size() const { return world_size(); }
  int shard_replicas() const { return world_size() / shard_size(); }
  // A host double summed over this rank's shard group only: a sum over the
  // shards of state every replica holds alike (a gradient norm), which a
  // sum over the world would count once per replica. Transports with
  // groups add in a fixed order, so every replica gets the same bits.
  virtual double allreduce_sum_host_shard_group(double value) { return allreduce_sum_host(value); }

  // Sharded collectives over a ShardLayout (comm/shard_layout.h) of
  // layout.total_count() elements, the same layout on every rank, with
  // layout.world_size() == shard_size(); the calling rank's range is
  // mine = layout.range(shard_rank()).
  //
  // reduce_scatter_sum_lowp: `send` is the full buffer (total_count) on
  // every rank; `recv` (mine.count() elements) gets the sum over all the
  // world's ranks of send[mine.begin, mine.end), with all-reduce
  // arithmetic: FP32 adds of FP16 values, one FP16 rounding per pairwise
  // step. With shard groups, a reduce-scatter inside the group, then an
  // all-reduce of the range across the replicas (every replica ends with
  // the same bits). The order of the adds is the transport's (NCCL's,
  // MPI's), not necessarily the all-reduce's, so a sum of three or more
  // ranks may differ from it by FP16 rounding. In place when recv == send +
  // mine.begin; the rest of send is then unspecified. Any other overlap of
  // the two buffers is an error.
  virtual void reduce_scatter_sum_lowp(const lowp16* send, lowp16* recv, const ShardLayout& layout) = 0;
  // allgather_lowp: `mine` (mine.count() elements) from every rank of the
  // shard group lands at full[range.begin, range.end) of each rank's range,
  // on every rank of the group: every rank ends with the same bits. In place
  // when mine == full + mine.begin; any other overlap is an error.
  virtual void allgather_lowp(const lowp16* mine, lowp16* full, const ShardLayout& layout) = 0;

  // Bucketed all-reduce, overlapped with backward: start an in-place FP16
  // sum of a bucket whose gradients the caller has finished (on a device:
  // queued), and return at once; wait_allreduces() makes every started sum
  // complete before the caller's next use of the buffers (host: returns
  // after them; device: orders the compute stream after them). Started
  // buckets must be disjoint and every rank starts the same ones in the same
  // order. The defaults are synchronous.
  virtual void start_allreduce_sum_lowp(lowp16* data, size_t count) { allreduce_sum_lowp(data, count); }
  // The sharded collectives' asynchronous twins, for the same overlap (a
  // bucket's reduce-scatter during backward, a layer's gather during the
  // previous layer's compute). They queue behind started all-reduces, in
  // call order, and wait_allreduces() completes them too (its name predates
  // them); their times count in take_allreduce_times(). The buffers and
  // the layout's ranges must stay untouched until that wait (the layout
  // object itself may go: it is copied).
  virtual void start_reduce_scatter_sum_lowp(const lowp16* send, lowp16* recv, const ShardLayout& layout) {
    reduce_scatter_sum_lowp(send, recv, layout);
  }
  virtual void start_allgather_lowp(const lowp16* mine, lowp16* full, const ShardLayout& layout) {
    allgather_lowp(mine, full, layout);
  }
  virtual void wait_allreduces() {}
  // --grad-reduce-dtype fp32: the gradients' bucketed sums in FP32 (FP32
  // buffers of the backend's memory, FP32 adds, no 16-bit rounding), in
  // every other respect start_allreduce_sum_lowp and
  // start_reduce_scatter_sum_lowp (started, in call order with the other
  // start_* calls, completed by wait_allreduces). A transport without them
  // throws ddp::Error naming itself (the default).
  virtual void start_allreduce_sum_fp32(float* data, size_t count);
  virtual void start_reduce_scatter_sum_fp32(const float* send, float* recv, const ShardLayout& layout);
  // A mark after every collective started so far (start_*, in call order),
  // and a wait for the collectives up to a mark only, those started after
  // it left in flight: how a layer waits for its own prefetched gather and
  // not for the gradients' reduce-scatters queued behind it (host: returns
  // after them; device: orders the compute stream after them). A mark is
  // good until the next wait_allreduces(). The defaults: every start_* is
  // synchronous, so there is nothing to wait for.
  using CollectiveMark = uint64_t;
  virtual CollectiveMark mark_started() { return 0; }
  virtual void wait_until(CollectiveMark /*mark*/) {}
  // Sizes now what the sharded collectives keep between calls (NCCL: the
  // padded staging of uneven layouts, otherwise grown on demand), so that a
  // later collective over `layout`, or over any layout needing no more,
  // does not grow it. Growing is refused once a CUDA graph has captured
  // the collectives (the graph holds the staging's address), so a run that
  // captures reserves, before its first capture, the widest layout it
  // moves outside the captured step (the checkpoints' FP32 gathers).
  // Local: not a collective. Host transports keep nothing.
  virtual void reserve_shard_staging(const ShardLayout& /*layout*/) {}

  // The FP16 collectives since the previous call, for the metrics: busy_s,
  // the time they took (host transports time the transfer; device ones their
  // stream); exposed_s, the part the caller stood waiting for them in
  // wait_allreduces (on a device, the compute stream's wait), i.e. not
  // hidden behind backward. May wait for the device: call at log time only.
  virtual AllreduceTimes take_allreduce_times() { return {}; }

  // Step capture (Backend::begin_capture): whether start/wait may be
  // recorded into a backend's capture (they are stream operations there),
  // and the capture's bounds, during which nothing is timed (a captured
  // timing event would never be recorded as such). Host transports cannot
  // be captured.
  virtual bool supports_capture() const { return false; }
  virtual void set_capturing(bool /*on*/) {}
  // Why supports_capture() is false, for the one-line error of --cuda-graph
  // (a clause: "--cuda-graph: " + reason); "" when it is true.
  virtual std::string capture_unsupported_reason() const {
    return supports_capture() ? "" : "the " + name() + " transport cannot be captured in a CUDA graph";
  }

  // --trace (collective_trace.h): from now on the FP16 collectives are
  // recorded in `trace` while trace->active (null: not traced). A device
  // transport fills the records' times in resolve_trace_times(), which may
  // wait for the device: at log steps only, after wait_allreduces().
  void set_trace(CollectiveTrace* trace) { trace_ = trace; }
  virtual void resolve_trace_times() {}

 protected:
  std::shared_ptr<CollectiveRecord> open_record(const char* op, size_t elements, size_t element_bytes = 2) {
    return trace_ != nullptr ? trace_->open(op, elements, element_bytes) : nullptr;
  }
  CollectiveTrace* trace_ = nullptr;  // not owned
};

// Throws ddp::Error unless `layout` is one of this communicator's shard
// group (`what`: the collective, for the message).
void check_layout_world(const Communicator& comm, const ShardLayout& layout, const char* what);
// shard_call_in_place's error.
[[noreturn]] void throw_partial_overlap(const char* what);
// Whether a sharded collective runs in place: true when `part` (part_count
// elements) is whole + part_offset, false when the two buffers do not
// overlap; throws ddp::Error for any other overlap.
template <class T>
bool shard_call_in_place(const T* whole, size_t whole_count, const T* part, size_t part_offset, size_t part_count,
                         const char* what) {
  if (part == whole + part_offset) return true;
  if (part_count == 0 || whole_count == 0) return false;  // nothing is read or written through both
  // As integers: pointers into different arrays do not compare with <.
  const auto at = [](const T* p) { return reinterpret_cast<std::uintptr_t>(p); };
  const bool disjoint = at(part + part_count) <= at(whole) || at(whole + whole_count) <= at(part);
  if (!disjoint) throw_partial_overlap(what);
  return false;
}

// A world of one: every collective is the identity, and the sharded ones
// copy (the one range is the whole buffer) unless they are in place. The
// copies go through `copies` (its copy_on_device, so device memory works);
// without one, buffers must be host memory (std::memcpy).
class SingleProcessCommunicator final : public Communicator {
 public:
  explicit SingleProcessCommunicator(Backend* copies = nullptr) : copies_(copies) {}
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string name() const override { return "single process"; }
  bool supports_capture() const override { return true; }  // nothing to capture
  void allreduce_sum_lowp(lowp16*, size_t) override {}
  void broadcast_bytes(void*, size_t, int) override {}
  double allreduce_sum_host(double value) override { return value; }
  int64_t allreduce_max_host(int64_t value) override { return value; }
  void allreduce_max_int32(int32_t*, size_t) override {}
  void reduce_scatter_sum_lowp(const lowp16* send, lowp16* recv, const ShardLayout& layout) override;
  void allgather_lowp(const lowp16* mine, lowp16* full, const ShardLayout& layout) override;
  void start_allreduce_sum_fp32(float*, size_t) override {}
  void start_reduce_scatter_sum_fp32(const float* send, float* recv, const ShardLayout& layout) override;
  void barrier() override {}

 private:
  void copy_bytes(void* dst, const void* src, size_t size_bytes);
  Backend* copies_;  // not owned; may be null (host memory)
};

}  // namespace ddp
