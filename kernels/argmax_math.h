// argmax_math.h: the first maximum of a row, as torch.argmax defines it
// (NaN is larger than every number, and the first NaN wins), written once
// for the CPU loop (ops/softmax_xent_cpu.cpp) and the CUDA warp (ops/softmax_xent_cuda.cu's
// row_stats). With NaN as a value like any other the order is total, so the
// two lanes of a butterfly pair always pick the same winner.
#pragma once

#include "kernels/host_device.h"

namespace ddp {

DDP_HD bool is_nan_value(float v) { return v != v; }

// Scanning j upward: does v at a later index replace the best so far?
DDP_HD bool argmax_scan_takes(float v, float best) {
  if (is_nan_value(best)) return false;  // the first NaN stays
  return is_nan_value(v) || v > best;
}

// Merging two candidates (value, index) with index -1 for none: does
// (v, j) beat (best, best_j)? Larger wins, NaN largest; on a tie the
// smaller index.
DDP_HD bool argmax_merge_takes(float v, int j, float best, int best_j) {
  if (j < 0) return false;
  if (best_j < 0) return true;
  const bool v_nan = is_nan_value(v), best_nan = is_nan_value(best);
  if (v_nan || best_nan) return v_nan && (!best_nan || j < best_j);
  return v > best || (v == best && j < best_j);
}

}  // namespace ddp
