// test_flash_attention_devices.cpp: the fused attention's CUDA row
// (kernels/ops/flash_attention.h) makes its shared-memory opt-in (head
// sizes whose tiles pass 48 KB) on every device the process launches on,
// not once per kernel (issue 48: it was remembered per kernel, so a second
// device's launch failed). The SIMT executor emulates two devices and
// keeps the opt-in per device, as CUDA does.
#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "kernels/error.h"
#include "kernels/ops/flash_attention.h"
#include "kernels/ops/op_test_support.h"
#include "support/test_cuda_op_context.h"

namespace ddp::test {
namespace {

using FlashAttentionDevices = OpTest;

TEST_P(FlashAttentionDevices, TheSharedMemoryOptInIsMadeOnEachDevice) {
  int devices = 0;
  ASSERT_EQ(cudaGetDeviceCount(&devices), cudaSuccess);
  if (devices < 2) GTEST_SKIP() << "needs two devices";
  const int seq_len = 8, head_size = kFlashCudaMaxHeadSize;  // 3 tiles of 32 x 129 floats: past 48 KB
  const size_t n = static_cast<size_t>(seq_len) * head_size;
  const std::vector<lowp16> q = fmt.random(rng, n), k = fmt.random(rng, n), v = fmt.random(rng, n);
  std::vector<std::vector<lowp16>> outs;
  for (const int device : {0, 1}) {
    ASSERT_EQ(cudaSetDevice(device), cudaSuccess);
    DeviceArray<lowp16> d_q(q), d_k(k), d_v(v), d_out(LowpFormat::poison(n));
    DeviceArray<float> d_lse(static_cast<size_t>(seq_len));
    TestCudaOpContext cuda(precision());  // made after cudaSetDevice: its scratch, were it asked, on this device
    AttentionForwardFused op;
    op.q = d_q.get();
    op.k = d_k.get();
    op.v = d_v.get();
    op.batch_heads = 1;
    op.seq_len = seq_len;
    op.head_size = head_size;
    op.scale = 0.125f;
    op.out = d_out.get();
    op.lse = d_lse.get();
    try {
      attention_forward_fused_lowp_cuda(cuda, op);
    } catch (const Error& e) {
      ADD_FAILURE() << "device " << device << ": " << e.what();
    }
    outs.push_back(d_out.download());
  }
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  expect_same_bits(fmt, outs[1], outs[0], "device 1's output against device 0's");
}

INSTANTIATE_TEST_SUITE_P(Precisions, FlashAttentionDevices, ::testing::ValuesIn(kBothPrecisions), precision_test_name);

}  // namespace
}  // namespace ddp::test
