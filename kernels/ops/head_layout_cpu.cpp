// head_layout_cpu.cpp: the CPU rows of the head permutes (head_layout.h):
// one memcpy of hs words per (b, h, t), split over CpuBackend's threads.
#include "kernels/ops/head_layout.h"

#include <cstring>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/error.h"

namespace ddp {

void rows_to_heads_lowp_cpu(CpuBackend& cpu, const RowsToHeads& op) {
  DDP_REQUIRE(op.batch >= 0 && op.seq_len >= 0 && op.heads >= 0 && op.head_size >= 0 &&
                  op.row_stride >= op.heads * op.head_size,
              "rows_to_heads_lowp: bad shape");
  const size_t t_count = count_of(op.seq_len), hs = count_of(op.head_size), nh = count_of(op.heads);
  // One output row (b, h, t) per index, in output order.
  cpu.parallel_rows(count_of(op.batch) * nh * t_count, hs, [&](size_t o0, size_t o1) {
    for (size_t o = o0; o < o1; ++o) {
      const size_t t = o % t_count, h = (o / t_count) % nh, b = o / (t_count * nh);
      std::memcpy(op.heads_out + o * hs, op.rows + (b * t_count + t) * count_of(op.row_stride) + h * hs,
                  hs * sizeof(lowp16));
    }
  });
}

void heads_to_rows_lowp_cpu(CpuBackend& cpu, const HeadsToRows& op) {
  DDP_REQUIRE(op.batch >= 0 && op.seq_len >= 0 && op.heads >= 0 && op.head_size >= 0 &&
                  op.row_stride >= op.heads * op.head_size,
              "heads_to_rows_lowp: bad shape");
  const size_t t_count = count_of(op.seq_len), hs = count_of(op.head_size), nh = count_of(op.heads);
  cpu.parallel_rows(count_of(op.batch) * nh * t_count, hs, [&](size_t o0, size_t o1) {
    for (size_t o = o0; o < o1; ++o) {
      const size_t t = o % t_count, h = (o / t_count) % nh, b = o / (t_count * nh);
      std::memcpy(op.rows + (b * t_count + t) * count_of(op.row_stride) + h * hs, op.heads_in + o * hs,
                  hs * sizeof(lowp16));
    }
  });
}

}  // namespace ddp
