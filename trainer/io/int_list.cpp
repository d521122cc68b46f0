// int_list.cpp
#include "trainer/io/int_list.h"

#include <sstream>

namespace ddp {

bool parse_int_list(const std::string& text, int64_t lo, int64_t hi, std::vector<int64_t>& out) {
  out.clear();
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || item.empty() || v < lo || v > hi) return false;
    out.push_back(v);
  }
  return !out.empty();
}

}  // namespace ddp
