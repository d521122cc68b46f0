// embedding_cuda.cu: the CUDA rows of the token + position embeddings
// (embedding.h).
//
// The backward must add every row of one token into the same table row in
// a fixed order (no atomics: their order, and so the FP32 sum's bits, would
// vary run to run). The rows are sorted by token with CUB's radix sort,
// which is stable, so each token's rows stay in increasing order; then one
// block per run of equal tokens sums that run, channel by channel, in that
// order: the order of CpuBackend's loop, hence its bits. A run is one
// block's, so a token that fills much of the batch (a space in byte-level
// text) makes one long block; for T*B = 8k rows that is still well under a
// millisecond.
#include "kernels/ops/embedding.h"

#include <climits>
#include <cmath>

#if defined(DDP_SIMT)
#include <algorithm>
#include <numeric>
#include <vector>
#else
#include <cub/device/device_radix_sort.cuh>
#endif

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_op_context.h"
#include "kernels/error.h"

namespace ddp {
namespace {

constexpr size_t kScratchAlignment = 256;

size_t aligned(size_t bytes) { return (bytes + kScratchAlignment - 1) / kScratchAlignment * kScratchAlignment; }

template <class C>
__global__ void embedding_forward_kernel(const int32_t* tokens, const lowp16* wte, const lowp16* wpe, int seq_len,
                                         int channels, int vocab, size_t count, lowp16* out) {
  for (size_t idx = global_thread_index(); idx < count; idx += grid_stride()) {
    const size_t r = idx / channels, c = idx % channels;
    const int32_t token = tokens[r];
    const size_t t = r % seq_len;
    out[idx] =
        token >= 0 && token < vocab
            ? C::narrow(C::widen(wte[static_cast<size_t>(token) * channels + c]) + C::widen(wpe[t * channels + c]))
            : C::narrow(NAN);
  }
}

__global__ void row_index_kernel(int32_t* index, int rows) {
  for (size_t r = global_thread_index(); r < static_cast<size_t>(rows); r += grid_stride())
    index[r] = static_cast<int32_t>(r);
}

// One block per sorted position; only the first position of each run of
// equal tokens does anything: it sums the run's rows of dout (in increasing
// row order, the sort being stable) into the token's table row.
template <class C>
__global__ void embedding_table_grad_kernel(const int32_t* sorted_tokens, const int32_t* sorted_rows, int rows,
                                            const lowp16* dout, int channels, int vocab, lowp16* d_wte,
                                            bool accumulate) {
  const int first = static_cast<int>(blockIdx.x);
  const int32_t token = sorted_tokens[first];
  if ((first > 0 && sorted_tokens[first - 1] == token) || token < 0 || token >= vocab) return;
  int end = first + 1;
  while (end < rows && sorted_tokens[end] == token) ++end;
  lowp16* dst = d_wte + static_cast<size_t>(token) * channels;
  for (int c = static_cast<int>(threadIdx.x); c < channels; c += static_cast<int>(blockDim.x)) {
    float sum = accumulate ? C::widen(dst[c]) : 0.0f;
    for (int i = first; i < end; ++i) sum += C::widen(dout[static_cast<size_t>(sorted_rows[i]) * channels + c]);
    dst[c] = C::narrow(sum);
  }
}

// d_wpe[t, c] = sum over b in increasing order (CpuBackend's order).
template <class C>
__global__ void position_grad_kernel(const lowp16* dout, int batch, int seq_len, int channels, lowp16* d_wpe,
                                     bool accumulate) {
  const size_t count = static_cast<size_t>(seq_len) * channels;
  for (size_t idx = global_thread_index(); idx < count; idx += grid_stride()) {
    float sum = accumulate ? C::widen(d_wpe[idx]) : 0.0f;
    for (int b = 0; b < batch; ++b) sum += C::widen(dout[static_cast<size_t>(b) * count + idx]);
    d_wpe[idx] = C::narrow(sum);
  }
}

#if defined(DDP_SIMT)
// The SIMT executor's build has no CUB (it needs nvcc): a host stable sort
// with CUB's contract (keys ascending as signed integers, equal keys in
// input order), on the executor's device memory, which the host can read.
size_t sort_temp_bytes(int) { return 0; }

void sort_rows_by_token(void*, size_t, const int32_t* tokens, int32_t* sorted_tokens, const int32_t* row_index,
                        int32_t* sorted_rows, int rows, cudaStream_t) {
  std::vector<int32_t> order(static_cast<size_t>(rows));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return tokens[a] < tokens[b]; });
  for (int i = 0; i < rows; ++i) {
    sorted_tokens[i] = tokens[order[static_cast<size_t>(i)]];
    sorted_rows[i] = row_index[order[static_cast<size_t>(i)]];
  }
}
#else
size_t sort_temp_bytes(int rows) {
  size_t bytes = 0;
  // With null storage CUB only computes the size: no launch, no sync.
  DDP_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const int32_t*>(nullptr),
                                                 static_cast<int32_t*>(nullptr), static_cast<const int32_t*>(nullptr),
                                                 static_cast<int32_t*>(nullptr), rows));
  return bytes;
}

// All 32 key bits: a token outside [0, vocab) must not share a run with a
// valid one (it is skipped by the table-gradient kernel).
void sort_rows_by_token(void* temp, size_t temp_bytes, const int32_t* tokens, int32_t* sorted_tokens,
                        const int32_t* row_index, int32_t* sorted_rows, int rows, cudaStream_t stream) {
  DDP_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, tokens, sorted_tokens, row_index, sorted_rows, rows,
                                                 0, 32, stream));
}
#endif

// The backward's scratch: the row index, the sorted tokens and rows, and
// the sort's own temporary storage, each aligned.
size_t embedding_backward_scratch_bytes(int rows) {
  const size_t index_bytes = aligned(static_cast<size_t>(rows) * sizeof(int32_t));
  return 3 * index_bytes + aligned(sort_temp_bytes(rows));
}

}  // namespace

void embedding_forward_lowp_cuda(CudaOpContext& cuda, const EmbeddingForward& op) {
  DDP_REQUIRE(op.batch >= 0 && op.seq_len >= 0 && op.channels >= 0 && op.vocab >= 0,
              "embedding_forward_lowp: negative shape");
  const size_t count = static_cast<size_t>(op.batch) * op.seq_len * op.channels;
  if (count == 0) return;
  with_codec(cuda.precision(), [&](auto codec) {
    using C = decltype(codec);
    launch_kernel<embedding_forward_kernel<C>>({grid_for(count), kThreadsPerBlock, 0, cuda.stream()}, op.tokens, op.wte,
                                               op.wpe, op.seq_len, op.channels, op.vocab, count, op.out);
  });
  DDP_CUDA_CHECK_LAUNCH();
}

void embedding_backward_lowp_cuda(CudaOpContext& cuda, const EmbeddingBackward& op) {
  const int batch = op.batch, seq_len = op.seq_len, channels = op.channels, vocab = op.vocab;
  DDP_REQUIRE(batch >= 0 && seq_len >= 0 && channels >= 0 && vocab >= 0, "embedding_backward_lowp: negative shape");
  DDP_REQUIRE(static_cast<long long>(batch) * seq_len <= INT_MAX,
              "embedding_backward_lowp: batch * seq_len past INT_MAX rows");
  const int rows = batch * seq_len;
  void* scratch = cuda.scratch(embedding_backward_scratch_bytes(rows));
  cudaStream_t stream = cuda.stream();
  const Precision p = cuda.precision();
  if (channels == 0) return;
  // Without accumulate, table rows of tokens that do not occur become 0;
  // the rest are overwritten below.
  if (!op.accumulate && vocab > 0)
    DDP_CUDA_CHECK(cudaMemsetAsync(op.d_wte, 0, static_cast<size_t>(vocab) * channels * sizeof(lowp16), stream));
  if (rows > 0) {
    const size_t index_bytes = aligned(static_cast<size_t>(rows) * sizeof(int32_t));
    auto* base = static_cast<char*>(scratch);
    auto* row_index = reinterpret_cast<int32_t*>(base);
    auto* sorted_tokens = reinterpret_cast<int32_t*>(base + index_bytes);
    auto* sorted_rows = reinterpret_cast<int32_t*>(base + 2 * index_bytes);
    void* temp = base + 3 * index_bytes;
    launch_kernel<row_index_kernel>({grid_for(rows), kThreadsPerBlock, 0, stream}, row_index, rows);
    DDP_CUDA_CHECK_LAUNCH();
    sort_rows_by_token(temp, sort_temp_bytes(rows), op.tokens, sorted_tokens, row_index, sorted_rows, rows, stream);
    const unsigned threads =
        channels >= static_cast<int>(kThreadsPerBlock) ? kThreadsPerBlock : 32u * ((channels + 31) / 32);
    with_codec(p, [&](auto codec) {
      using C = decltype(codec);
      launch_kernel<embedding_table_grad_kernel<C>>({static_cast<unsigned>(rows), threads, 0, stream}, sorted_tokens,
                                                    sorted_rows, rows, op.dout, channels, vocab, op.d_wte,
                                                    op.accumulate);
    });
    DDP_CUDA_CHECK_LAUNCH();
  }
  const size_t positions = static_cast<size_t>(seq_len) * channels;
  if (positions == 0) return;
  with_codec(p, [&](auto codec) {
    using C = decltype(codec);
    launch_kernel<position_grad_kernel<C>>({grid_for(positions), kThreadsPerBlock, 0, stream}, op.dout, batch, seq_len,
                                           channels, op.d_wpe, op.accumulate);
  });
  DDP_CUDA_CHECK_LAUNCH();
}

}  // namespace ddp
