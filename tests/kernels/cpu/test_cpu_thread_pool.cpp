// test_cpu_thread_pool.cpp: CpuThreadPool, the workers CpuBackend splits its
// large passes over: every index covered once, exceptions rethrown, nested
// calls run inline.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_thread_pool.h"
#include "kernels/error.h"

namespace ddp {
namespace {

TEST(CpuThreadPool, ParallelForCoversEveryIndexOnce) {
  for (int threads : {1, 2, 3}) {
    CpuThreadPool pool(threads);
    for (size_t count : {size_t{0}, size_t{1}, size_t{63}, size_t{64}, size_t{1000}, size_t{100003}})
      for (size_t pieces : {size_t{1}, size_t{2}, size_t{7}, size_t{64}}) {
        std::vector<std::atomic<int>> hits(count);
        pool.parallel_for(count, 64, pieces, [&](size_t b, size_t e) {
          EXPECT_EQ(b % 64, 0u);
          for (size_t i = b; i < e; ++i) hits[i].fetch_add(1);
        });
        for (size_t i = 0; i < count; ++i)
          ASSERT_EQ(hits[i].load(), 1) << "threads " << threads << " pieces " << pieces << " i " << i;
      }
  }
}

TEST(CpuThreadPool, RethrowsAndRunsNestedCallsInline) {
  CpuThreadPool pool(2);
  for (size_t bad : {size_t{0}, size_t{500}, size_t{990}})  // whichever thread takes the piece
    EXPECT_THROW(pool.parallel_for(1000, 10, 100,
                                   [&](size_t b, size_t) {
                                     if (b == bad) throw std::runtime_error("piece");
                                   }),
                 std::runtime_error);
  std::atomic<int> hits{0};
  pool.parallel_for(8, 1, 8, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) pool.parallel_for(10, 1, 10, [&](size_t b2, size_t e2) { hits += int(e2 - b2); });
  });
  EXPECT_EQ(hits.load(), 80);
  pool.parallel_for(100, 1, 4, [&](size_t b, size_t e) { hits += int(e - b); });  // still usable
  EXPECT_EQ(hits.load(), 180);
}

// More threads than the system will start (here an address-space limit
// that leaves room for a few 8 MiB stacks; as root a process limit does not
// bind) is one error saying so, and the workers that did start are stopped:
// before, the half-built pool's joinable threads ended the process
// (std::terminate). In a child: the limit is the process's.
TEST(CpuThreadPool, AStartTheSystemRefusesIsOneErrorNotATermination) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    alarm(60);  // a start that hangs instead of failing ends the child, and fails the test
    std::ifstream status("/proc/self/status");
    long vm_kib = 0;
    for (std::string key; status >> key;)
      if (key == "VmSize:") status >> vm_kib;
    const rlim_t limit = static_cast<rlim_t>(vm_kib + 64 * 1024) * 1024;
    const rlimit as{limit, limit};
    setrlimit(RLIMIT_AS, &as);
    try {
      CpuThreadPool pool(256);
    } catch (const Error& e) {
      _exit(std::string(e.what()).find("cannot start 256 CPU threads: the system refused thread ") == 0 ? 0 : 2);
    }
    _exit(3);  // all 256 started: the limit did not bind
  }
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << "the child ended by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace ddp
