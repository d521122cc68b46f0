// simt_fiber_stacks.cpp: mmap'd fiber stacks with guard pages (see the header).
#include "kernels/simt/simt_fiber_stacks.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "kernels/error.h"

namespace ddp::simt {
namespace {
size_t page_bytes() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }
}  // namespace

FiberStacks::~FiberStacks() {
  for (char* m : mappings_)
    if (m) munmap(m, page_bytes() + kStackBytes);
}

boost::context::stack_context FiberStacks::stack(size_t i) {
  if (i >= mappings_.size()) mappings_.resize(i + 1, nullptr);
  if (!mappings_[i]) {
    const size_t guard = page_bytes();
    void* m =
        mmap(nullptr, guard + kStackBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) throw Error(std::string("SIMT executor: cannot map a fiber stack: ") + std::strerror(errno));
    mprotect(m, guard, PROT_NONE);
    mappings_[i] = static_cast<char*>(m);
  }
  boost::context::stack_context sc;
  sc.size = kStackBytes;
  sc.sp = mappings_[i] + page_bytes() + kStackBytes;  // stacks grow down from the top
  return sc;
}

}  // namespace ddp::simt
