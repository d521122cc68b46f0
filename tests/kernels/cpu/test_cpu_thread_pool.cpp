// test_cpu_thread_pool.cpp: CpuThreadPool, the workers CpuBackend splits its
// large passes over: every index covered once, exceptions rethrown, nested
// calls run inline.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

#include "kernels/cpu/cpu_thread_pool.h"

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

}  // namespace
}  // namespace ddp
