// simt_access_check.h: every load and store of kernel code, checked
// (simt_access_check.cpp).
#pragma once

#include <cstddef>

namespace ddp::simt {

// A barrier (or a block's start): what was written and read before it is
// ordered before everything after it.
void start_access_epoch();
void check_access(const void* address, size_t bytes, bool write, const void* pc);

}  // namespace ddp::simt
