// simt_fiber_stacks.h: the executor's fiber stacks, mapped once and reused
// by every block (a block of 1,024 threads needs 1,024 stacks; mapping them
// per block would cost two system calls per CUDA thread). Each stack has an
// inaccessible guard page below it, so a kernel that overflows its stack
// stops with SIGSEGV instead of writing over its neighbour.
#pragma once

#include <cstddef>
#include <vector>

#include <boost/context/stack_context.hpp>

namespace ddp::simt {

class FiberStacks {
 public:
  static constexpr size_t kStackBytes = 256 * 1024;
  FiberStacks() = default;
  FiberStacks(const FiberStacks&) = delete;
  FiberStacks& operator=(const FiberStacks&) = delete;
  ~FiberStacks();

  // Stack `i` (0 <= i < 1024), mapped on first use.
  boost::context::stack_context stack(size_t i);

 private:
  std::vector<char*> mappings_;  // each: guard page + kStackBytes
};

// Boost.Context's StackAllocator concept over one preallocated stack.
class BorrowedStack {
 public:
  explicit BorrowedStack(boost::context::stack_context stack) : stack_(stack) {}
  boost::context::stack_context allocate() { return stack_; }
  void deallocate(boost::context::stack_context&) noexcept {}

 private:
  boost::context::stack_context stack_;
};

}  // namespace ddp::simt
