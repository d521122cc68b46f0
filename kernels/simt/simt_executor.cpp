// simt_executor.cpp: runs a kernel's grid on the CPU with CUDA's execution
// model, for CI machines without a GPU.
//
// Each CUDA thread is a fiber (Boost.Context's fiber: a user-space context
// switch in a few nanoseconds; ucontext's swapcontext makes a
// sigprocmask system call on every switch, and a block of 256 threads
// switches at every shuffle of every lane). A block's fibers run on the
// calling OS thread, one at a time, each until it reaches a synchronisation
// point (__syncthreads, __syncwarp, a shuffle, a vote) or exits; blocks run
// one after another, in blockIdx order. A barrier releases when every live
// thread of the block has reached it; a warp exchange completes when every
// lane its mask names has reached it, and then every lane reads what the
// others deposited, as in lockstep.
//
// What a GPU would not forgive, or leaves undefined, is an error naming the
// kernel and the block: launch shapes over the limits, dynamic shared
// memory over the kernel's allowance on the device, a barrier some live
// threads never reach or reach at another line, a warp exchange whose mask
// names an exited or missing lane or that lanes join with another mask, a
// deadlock; the access checks (simt_access_check.cpp) add shared-memory
// races and out-of-bounds accesses. One host thread at a time.
#include "kernels/simt/simt_executor.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include <boost/context/fiber.hpp>

#include "kernels/error.h"
#include "kernels/simt/simt_access_check.h"
#include "kernels/simt/simt_device.h"
#include "kernels/simt/simt_fiber_stacks.h"
#include "kernels/simt/simt_launch.h"
#include "kernels/simt/simt_runtime_state.h"

namespace ddp::simt {

thread_local const ThreadIndex* g_running_thread = nullptr;

namespace {

namespace ctx = boost::context;

constexpr unsigned kFullMask = 0xffffffffu;
constexpr size_t kSharedGuardBytes = 64 * 1024;  // each side: an access there is out of bounds
constexpr unsigned char kSharedPoison = 0xff;    // NaN in FP32, FP16 and BF16: unwritten shared memory shows

// Unwinds a thread's fiber after the launch failed (thrown at its next
// synchronisation point).
struct KernelAbort {};

enum class State { kReady, kRunning, kAtBarrier, kAtExchange, kExited };
enum class ExchangeKind { kShuffle, kBallot, kSyncwarp };

const char* exchange_name(ExchangeKind k) {
  switch (k) {
    case ExchangeKind::kShuffle:
      return "shuffle";
    case ExchangeKind::kBallot:
      return "vote";
    case ExchangeKind::kSyncwarp:
      return "__syncwarp()";
  }
  return "?";
}

bool same_site(Site a, Site b) { return a.line == b.line && std::strcmp(a.file, b.file) == 0; }

std::string site_text(Site s) {
  const char* slash = std::strrchr(s.file, '/');
  return std::string(slash ? slash + 1 : s.file) + ":" + std::to_string(s.line);
}

std::string mask_text(unsigned mask) {
  std::ostringstream out;
  out << "0x" << std::hex << mask;
  return out.str();
}

std::string lanes_text(unsigned lanes) {
  std::string text;
  for (int lane = 0; lane < 32; ++lane)
    if (lanes & (1u << lane)) text += (text.empty() ? "" : ",") + std::to_string(lane);
  return "{" + text + "}";
}

struct SimThread {
  ThreadIndex index;
  RunningThread running;
  int lane = 0;
  State state = State::kReady;
  Site site{"", 0};
  uint64_t deposit = 0;
  int src_lane = 0;
  uint64_t result = 0;
  ctx::fiber context;    // this thread, while suspended
  ctx::fiber scheduler;  // the block's scheduler, while this thread runs
};

struct Exchange {
  ExchangeKind kind;
  unsigned mask;
  unsigned arrived;
  Site site;
};

struct Warp {
  unsigned present = 0;  // lanes that exist (the last warp of a block may be partial)
  unsigned exited = 0;
  std::vector<unsigned> sync_masks;  // the completed __syncwarp()s' masks, in order
  std::vector<Exchange> pending;
};

struct Block {
  const KernelLaunch* launch = nullptr;
  uint3 block_idx{};
  std::vector<SimThread> threads;
  std::vector<Warp> warps;
  std::deque<int> ready;
  int live = 0;
  int at_barrier = 0;
  Site barrier_site{"", 0};
  Site last_barrier{nullptr, 0};
  std::vector<unsigned char> dynamic_shared;  // guard + bytes + guard
  std::string failure;
};

thread_local Block* g_block = nullptr;
thread_local SimThread* g_thread = nullptr;

std::string dim_text(const dim3& d) {
  return "(" + std::to_string(d.x) + "," + std::to_string(d.y) + "," + std::to_string(d.z) + ")";
}

SimThread& current(const char* what) {
  if (!g_thread) throw Error(std::string("SIMT executor: ") + what + " called outside a kernel");
  return *g_thread;
}

void yield(SimThread& t) {
  t.scheduler = std::move(t.scheduler).resume();
  if (!g_block->failure.empty()) throw KernelAbort{};
}

[[noreturn]] void fail_here(const std::string& message) {
  fail(message);
  throw KernelAbort{};
}

void release_barrier(Block& b) {
  for (size_t i = 0; i < b.threads.size(); ++i) {
    if (b.threads[i].state != State::kAtBarrier) continue;
    b.threads[i].state = State::kReady;
    b.ready.push_back(static_cast<int>(i));
  }
  b.at_barrier = 0;
  b.last_barrier = b.barrier_site;
  start_access_epoch();
}

// What the lanes of `lanes` in warp `w` are doing, for a deadlock message.
std::string where_lanes_are(const Block& b, int w, unsigned lanes) {
  std::string text;
  for (int lane = 0; lane < 32; ++lane) {
    if (!(lanes & (1u << lane))) continue;
    const SimThread& t = b.threads[static_cast<size_t>(w * 32 + lane)];
    std::string state;
    if (t.state == State::kAtBarrier) state = "waits at the __syncthreads() at " + site_text(t.site);
    if (t.state == State::kAtExchange) state = "waits at the warp exchange at " + site_text(t.site);
    if (t.state == State::kExited) state = "has exited";
    if (!state.empty()) return "lane " + std::to_string(lane) + " " + state;
  }
  return text;
}

std::string describe_deadlock(const Block& b) {
  std::string text = "deadlock: no thread can go on (" + std::to_string(b.live) + " live).";
  if (b.at_barrier > 0)
    text += " " + std::to_string(b.at_barrier) + " threads wait at the __syncthreads() at " +
            site_text(b.barrier_site) + ";";
  for (size_t w = 0; w < b.warps.size(); ++w)
    for (const Exchange& e : b.warps[w].pending) {
      const unsigned missing = e.mask & ~e.arrived;
      text += " warp " + std::to_string(w) + ": the " + exchange_name(e.kind) + " at " + site_text(e.site) + " (mask " +
              mask_text(e.mask) + ") waits for lanes " + lanes_text(missing) + ": " +
              where_lanes_are(b, static_cast<int>(w), missing) + ";";
    }
  return text + " a barrier or warp exchange in code that not all threads reach";
}

// The last lane of an exchange arrived: every lane gets its result.
void complete_exchange(Block& b, int w, const Exchange& e) {
  Warp& warp = b.warps[static_cast<size_t>(w)];
  unsigned ballot_bits = 0;
  for (int lane = 0; lane < 32; ++lane)
    if ((e.mask & (1u << lane)) && b.threads[static_cast<size_t>(w * 32 + lane)].deposit != 0)
      ballot_bits |= 1u << lane;
  for (int lane = 0; lane < 32; ++lane) {
    if (!(e.mask & (1u << lane))) continue;
    SimThread& t = b.threads[static_cast<size_t>(w * 32 + lane)];
    if (e.kind == ExchangeKind::kShuffle) t.result = b.threads[static_cast<size_t>(w * 32 + t.src_lane)].deposit;
    if (e.kind == ExchangeKind::kBallot) t.result = ballot_bits;
    t.state = State::kReady;
    b.ready.push_back(w * 32 + lane);
  }
  if (e.kind == ExchangeKind::kSyncwarp) warp.sync_masks.push_back(e.mask);
}

uint64_t exchange(ExchangeKind kind, Site site, unsigned mask, uint64_t deposit, int src_lane) {
  SimThread& t = current(exchange_name(kind));
  if (!g_block->failure.empty()) throw KernelAbort{};
  Block& b = *g_block;
  Warp& warp = b.warps[static_cast<size_t>(t.running.warp)];
  const unsigned bit = 1u << t.lane;
  const auto who = [&] {
    return thread_name(t.running.linear) + " (warp " + std::to_string(t.running.warp) + ", lane " +
           std::to_string(t.lane) + ") at the " + exchange_name(kind) + " at " + site_text(site);
  };
  if (!(mask & bit)) fail_here(who() + ": its mask " + mask_text(mask) + " does not name its own lane");
  if (mask & ~warp.present)
    fail_here(who() + ": the mask " + mask_text(mask) + " names lanes " + lanes_text(mask & ~warp.present) +
              " that this block of " + std::to_string(b.threads.size()) + " threads does not have");
  if (mask & warp.exited)
    fail_here(who() + ": the mask " + mask_text(mask) + " names lanes " + lanes_text(mask & warp.exited) +
              " that have exited (CUDA leaves the result undefined)");
  if (kind == ExchangeKind::kShuffle && !(mask & (1u << src_lane)))
    fail_here(who() + ": reads lane " + std::to_string(src_lane) + ", which the mask " + mask_text(mask) +
              " does not name (CUDA leaves the value undefined)");
  auto it = std::find_if(warp.pending.begin(), warp.pending.end(), [&](const Exchange& e) { return e.mask & mask; });
  if (it == warp.pending.end()) {
    warp.pending.push_back(Exchange{kind, mask, 0, site});
    it = warp.pending.end() - 1;
  } else if (it->mask != mask || it->kind != kind) {
    fail_here(who() + " with mask " + mask_text(mask) + ": diverged from lanes " + lanes_text(it->arrived) +
              ", which wait at the " + exchange_name(it->kind) + " at " + site_text(it->site) + " with mask " +
              mask_text(it->mask));
  }
  t.deposit = deposit;
  t.src_lane = src_lane;
  t.site = site;
  t.state = State::kAtExchange;
  it->arrived |= bit;
  if (it->arrived == it->mask) {
    const Exchange done = *it;
    warp.pending.erase(it);
    complete_exchange(b, t.running.warp, done);
  }
  yield(t);
  return t.result;
}

void thread_exits(Block& b, SimThread& t) {
  t.state = State::kExited;
  --b.live;
  Warp& warp = b.warps[static_cast<size_t>(t.running.warp)];
  warp.exited |= 1u << t.lane;
  for (const Exchange& e : warp.pending)
    if (e.mask & (1u << t.lane))
      fail(thread_name(t.running.linear) + " (lane " + std::to_string(t.lane) + ") exits while lanes " +
           lanes_text(e.arrived) + " of its warp wait for it at the " + exchange_name(e.kind) + " at " +
           site_text(e.site));
  if (b.at_barrier > 0 && b.at_barrier == b.live) release_barrier(b);
}

void check_shape(const KernelLaunch& l) {
  const dim3 &g = l.grid, &k = l.block;
  const unsigned long long threads = static_cast<unsigned long long>(k.x) * k.y * k.z;
  if (k.x == 0 || k.y == 0 || k.z == 0 || k.x > 1024 || k.y > 1024 || k.z > 64 || threads > 1024)
    throw Error("SIMT executor: kernel " + l.kernel_name + ": block " + dim_text(k) +
                " is over CUDA's limits (at most 1024 threads; x, y <= 1024, z <= 64; none zero)");
  if (g.x == 0 || g.y == 0 || g.z == 0 || g.x > 2147483647u || g.y > 65535 || g.z > 65535)
    throw Error("SIMT executor: kernel " + l.kernel_name + ": grid " + dim_text(g) +
                " is over CUDA's limits (x <= 2^31 - 1, y and z <= 65535, none zero)");
  const size_t limit = dynamic_shared_limit(l.kernel_id);
  if (l.dynamic_shared_bytes > limit)
    throw Error("SIMT executor: kernel " + l.kernel_name + ": asks for " + std::to_string(l.dynamic_shared_bytes) +
                " bytes of dynamic shared memory; on device " + std::to_string(current_device()) + " it may have " +
                std::to_string(limit) +
                (limit == static_cast<size_t>(kSharedBytesDefaultLimit)
                     ? " (48 KB: raise it with cudaFuncSetAttribute(kernel, "
                       "cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) on this device)"
                     : " (its cudaFuncAttributeMaxDynamicSharedMemorySize there)"));
  if (!stream_exists(l.stream))
    throw Error("SIMT executor: kernel " + l.kernel_name + ": launched on a stream that does not exist (destroyed?)");
}

FiberStacks& stacks() {
  thread_local FiberStacks s;
  return s;
}

void run_block(Block& b, const std::function<void()>& body) {
  const KernelLaunch& l = *b.launch;
  const dim3 k = l.block;
  const size_t n = static_cast<size_t>(k.x) * k.y * k.z;
  b.threads.clear();
  b.threads.resize(n);  // never resized while fibers run: they hold references into it
  b.warps.assign((n + 31) / 32, Warp{});
  b.ready.clear();
  b.live = static_cast<int>(n);
  b.at_barrier = 0;
  b.last_barrier = Site{nullptr, 0};
  std::fill(b.dynamic_shared.begin(), b.dynamic_shared.end(), kSharedPoison);
  start_access_epoch();
  for (size_t i = 0; i < n; ++i) {
    SimThread& t = b.threads[i];
    const auto linear = static_cast<unsigned>(i);
    t.index = ThreadIndex{uint3{linear % k.x, linear / k.x % k.y, linear / (k.x * k.y)}, b.block_idx, l.block, l.grid};
    const ctx::stack_context stack = stacks().stack(i);
    t.running =
        RunningThread{static_cast<int>(i), static_cast<int>(i / 32), reinterpret_cast<uintptr_t>(stack.sp) - stack.size,
                      reinterpret_cast<uintptr_t>(stack.sp)};
    t.lane = static_cast<int>(i % 32);
    b.warps[i / 32].present |= 1u << t.lane;
    t.context = ctx::fiber(std::allocator_arg, BorrowedStack(stack), [&b, i, &body](ctx::fiber&& scheduler) {
      SimThread& self = b.threads[i];
      self.scheduler = std::move(scheduler);
      try {
        body();
      } catch (const ctx::detail::forced_unwind&) {
        throw;
      } catch (const KernelAbort&) {
      } catch (const std::exception& e) {
        fail(thread_name(self.running.linear) + " threw: " + e.what());
      }
      thread_exits(b, self);
      return std::move(self.scheduler);
    });
    b.ready.push_back(static_cast<int>(i));
  }
  while (!b.ready.empty() && b.failure.empty()) {
    SimThread& t = b.threads[static_cast<size_t>(b.ready.front())];
    b.ready.pop_front();
    t.state = State::kRunning;
    g_thread = &t;
    g_running_thread = &t.index;
    t.context = std::move(t.context).resume();
    g_thread = nullptr;
    g_running_thread = nullptr;
  }
  if (b.failure.empty() && b.live > 0) b.failure = describe_deadlock(b);
  b.threads.clear();  // unwinds the fibers still suspended (after a failure)
}

}  // namespace

const RunningThread* running_thread() { return g_thread ? &g_thread->running : nullptr; }

uint32_t warp_sync_count(int warp) {
  return static_cast<uint32_t>(g_block->warps[static_cast<size_t>(warp)].sync_masks.size());
}

bool warp_synced_since(int warp, uint32_t since, int linear_a, int linear_b) {
  const std::vector<unsigned>& masks = g_block->warps[static_cast<size_t>(warp)].sync_masks;
  const unsigned both = (1u << (linear_a % 32)) | (1u << (linear_b % 32));
  for (size_t i = since; i < masks.size(); ++i)
    if ((masks[i] & both) == both) return true;
  return false;
}

int warp_of(int linear) { return linear / 32; }

std::string thread_name(int linear) {
  const uint3 t = g_block->threads[static_cast<size_t>(linear)].index.thread_idx;
  return "thread (" + std::to_string(t.x) + "," + std::to_string(t.y) + "," + std::to_string(t.z) + ")";
}

std::string last_barrier_name() {
  if (!g_block || !g_block->last_barrier.file) return "the block's start";
  return "the __syncthreads() at " + site_text(g_block->last_barrier);
}

SharedRange dynamic_shared_range() {
  if (!g_block) return SharedRange{0, 0, 0};
  return SharedRange{reinterpret_cast<uintptr_t>(g_block->dynamic_shared.data()) + kSharedGuardBytes,
                     g_block->launch->dynamic_shared_bytes, kSharedGuardBytes};
}

void fail(const std::string& message) {
  if (g_block && g_block->failure.empty()) g_block->failure = message;
}

void* dynamic_shared_memory() {
  if (!g_block) throw Error("SIMT executor: dynamic shared memory asked for outside a kernel");
  return g_block->dynamic_shared.data() + kSharedGuardBytes;
}

unsigned lane_id() { return static_cast<unsigned>(current("a warp intrinsic").lane); }

void sync_block(Site site) {
  SimThread& t = current("__syncthreads()");
  Block& b = *g_block;
  if (!b.failure.empty()) throw KernelAbort{};
  for (const Exchange& e : b.warps[static_cast<size_t>(t.running.warp)].pending)
    if (e.mask & (1u << t.lane))
      fail_here(thread_name(t.running.linear) + " reaches the __syncthreads() at " + site_text(site) + " while lanes " +
                lanes_text(e.arrived) + " of its warp wait for it at the " + exchange_name(e.kind) + " at " +
                site_text(e.site));
  if (b.at_barrier > 0 && !same_site(site, b.barrier_site))
    fail_here("divergent __syncthreads(): " + thread_name(t.running.linear) + " reaches the one at " + site_text(site) +
              " while " + std::to_string(b.at_barrier) + " threads wait at the one at " + site_text(b.barrier_site));
  b.barrier_site = site;
  t.site = site;
  t.state = State::kAtBarrier;
  ++b.at_barrier;
  if (b.at_barrier == b.live) release_barrier(b);
  yield(t);
}

void sync_warp(Site site, unsigned mask) { exchange(ExchangeKind::kSyncwarp, site, mask, 0, 0); }

uint64_t shuffle_bits(Site site, unsigned mask, uint64_t bits, int src_lane) {
  return exchange(ExchangeKind::kShuffle, site, mask, bits, src_lane);
}

unsigned ballot(Site site, unsigned mask, bool predicate) {
  return static_cast<unsigned>(exchange(ExchangeKind::kBallot, site, mask, predicate ? 1 : 0, 0));
}

// DDP_SIMT_LAUNCH_LOG=path: each kernel's name, once per process, appended
// to path (which kernels a suite ran: the coverage in launch/results/).
void log_launch(const std::string& kernel_name) {
  static const char* path = std::getenv("DDP_SIMT_LAUNCH_LOG");
  static std::set<std::string> logged;
  if (!path || !logged.insert(kernel_name).second) return;
  if (std::FILE* f = std::fopen(path, "a")) {
    std::fprintf(f, "%s\n", kernel_name.c_str());
    std::fclose(f);
  }
}

void launch_grid(const KernelLaunch& launch, const std::function<void()>& thread_body) {
  if (g_block) throw Error("SIMT executor: kernel " + launch.kernel_name + " launched from inside a kernel");
  check_shape(launch);
  log_launch(launch.kernel_name);
  Block block;
  block.launch = &launch;
  // Guards even around zero bytes: an access there is reported, not a crash.
  block.dynamic_shared.resize(launch.dynamic_shared_bytes + 2 * kSharedGuardBytes);
  // g_block names the running launch; reset however this one ends.
  struct RunningLaunch {
    explicit RunningLaunch(Block* b) { g_block = b; }
    ~RunningLaunch() { g_block = nullptr; }
    RunningLaunch(const RunningLaunch&) = delete;
    RunningLaunch& operator=(const RunningLaunch&) = delete;
  } running(&block);
  const dim3 g = launch.grid;
  for (unsigned z = 0; z < g.z && block.failure.empty(); ++z)
    for (unsigned y = 0; y < g.y && block.failure.empty(); ++y)
      for (unsigned x = 0; x < g.x && block.failure.empty(); ++x) {
        block.block_idx = uint3{x, y, z};
        run_block(block, thread_body);
      }
  if (!block.failure.empty())
    throw Error("SIMT executor: kernel " + launch.kernel_name + ", block (" + std::to_string(block.block_idx.x) + "," +
                std::to_string(block.block_idx.y) + "," + std::to_string(block.block_idx.z) + "): " + block.failure);
}

}  // namespace ddp::simt
