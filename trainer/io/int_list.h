// int_list.h: comma-separated integer lists, as flags and config files give
// them (--layers 784,512,10, --inject-overflow 3,7).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ddp {

// Comma-separated integers in [lo, hi]; false on anything else.
bool parse_int_list(const std::string& text, int64_t lo, int64_t hi, std::vector<int64_t>& out);

}  // namespace ddp
