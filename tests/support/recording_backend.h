// recording_backend.h (tests): a Backend that forwards every operation to a
// CpuBackend and
//   - counts the calls that make the host wait for the device
//     (copy_to_host, synchronize), so a test can check a training step
//     makes none;
//   - can claim to be a CUDA device (kind()), so the trainer treats host
//     reads as costly, as it does on a GPU;
//   - emulates CUDA graph capture: between begin_capture and end_capture each
//     operation is recorded (its by-value arguments copied) instead of run,
//     and a host wait or upload throws, as stream capture forbids; replay
//     runs the recording. A trainer whose captured step froze a per-step
//     value (a scale, an lr passed by value) gives different results from
//     the eager run under this backend;
//   - tells an observer (on_operation) of each queued operation as it is
//     issued, so a test can tell where in a step something else happened
//     (mpi_test_overlap.cpp: how much backward was left at a bucket start);
//   - queues a test transport's collectives with its own operations
//     (queue_operation), as a CUDA stream orders NCCL's with the kernels, so
//     a capture records them and a replay runs them
//     (nccl_staging_communicator.h).
#pragma once

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/cpu_backend.h"

namespace ddp {

class RecordingBackend final : public Backend {
 public:
  RecordingBackend(DeviceKind claimed_kind, bool can_capture, Precision precision = Precision::Fp16)
      : cpu_(1, precision), kind_(claimed_kind), can_capture_(can_capture) {}

  int host_waits = 0;  // copy_to_host + synchronize calls
  int replays = 0;
  // Operations a capture recorded that had never run eagerly: on a GPU their
  // first run (a cuBLASLt plan, a buffer grown on demand) would happen inside
  // the capture, where it is not allowed.
  std::vector<std::string> first_seen_in_capture;
  // Called with the name of each queued operation (gemm_lowp, mse_backward...)
  // as it is issued, before it runs or is recorded.
  std::function<void(const char* operation)> on_operation;

  // Runs `op` now, or, inside a capture, records it for every replay, in
  // order with this backend's own operations.
  void queue_operation(const char* name, std::function<void()> op) { queue(name, std::move(op)); }

  DeviceKind kind() const override { return kind_; }
  Precision precision() const override { return cpu_.precision(); }
  std::string description() const override { return "recording(" + cpu_.description() + ")"; }

  void* allocate_bytes(size_t n) override {
    refuse_in_capture("allocate_bytes");
    return cpu_.allocate_bytes(n);
  }
  void free_bytes(void* p) noexcept override { cpu_.free_bytes(p); }
  void copy_to_device(void* d, const void* s, size_t n) override {
    refuse_in_capture("copy_to_device");
    cpu_.copy_to_device(d, s, n);
  }
  void copy_to_host(void* d, const void* s, size_t n) override {
    refuse_in_capture("copy_to_host");
    ++host_waits;
    cpu_.copy_to_host(d, s, n);
  }
  // Uploads happen between steps, outside any capture (the CPU slots copy at once).
  std::unique_ptr<UploadSlots> make_upload_slots(size_t slot_bytes) override {
    refuse_in_capture("make_upload_slots");
    return cpu_.make_upload_slots(slot_bytes);
  }
  void copy_on_device(void* d, const void* s, size_t n) override {
    queue("copy_on_device", [=] { cpu_.copy_on_device(d, s, n); });
  }
  void fill_zero(void* d, size_t n) override {
    queue("fill_zero", [=] { cpu_.fill_zero(d, n); });
  }
  void synchronize() override {
    refuse_in_capture("synchronize");
    ++host_waits;
  }
  void gemm_lowp(const GemmLowp& g) override {
    queue("gemm_lowp", [=] { cpu_.gemm_lowp(g); });
  }
  void gemm_lowp_to_fp32(const GemmLowp& g, float* c) override {
    queue("gemm_lowp_to_fp32", [=] { cpu_.gemm_lowp_to_fp32(g, c); });
  }
  void cast_fp32_to_lowp(const float* s, lowp16* d, size_t n) override {
    queue("cast_fp32_to_lowp", [=] { cpu_.cast_fp32_to_lowp(s, d, n); });
  }
  void add_fp32_into_lowp(const float* s, lowp16* y, size_t n) override {
    queue("add_fp32_into_lowp", [=] { cpu_.add_fp32_into_lowp(s, y, n); });
  }
  void softmax_xent_forward(const lowp16* l, const int32_t* lab, int r, int c, int real, float* loss,
                            int32_t* ok) override {
    queue("softmax_xent_forward", [=] { cpu_.softmax_xent_forward(l, lab, r, c, real, loss, ok); });
  }
  void softmax_xent_backward(const lowp16* l, const int32_t* lab, int r, int c, int real, ScalarArg s,
                             lowp16* d) override {
    queue("softmax_xent_backward", [=] { cpu_.softmax_xent_backward(l, lab, r, c, real, s, d); });
  }
  void embedding_forward_lowp(const int32_t* tok, const lowp16* wte, const lowp16* wpe, int b, int t, int c, int v,
                              lowp16* out) override {
    queue("embedding_forward_lowp", [=] { cpu_.embedding_forward_lowp(tok, wte, wpe, b, t, c, v, out); });
  }
  void embedding_backward_lowp(const int32_t* tok, const lowp16* dout, int b, int t, int c, int v, lowp16* d_wte,
                               lowp16* d_wpe, bool acc) override {
    queue("embedding_backward_lowp", [=] { cpu_.embedding_backward_lowp(tok, dout, b, t, c, v, d_wte, d_wpe, acc); });
  }
  void layernorm_forward_lowp(const lowp16* x, const lowp16* g, const lowp16* b, int r, int c, float eps, lowp16* y,
                              float* mean, float* rstd) override {
    queue("layernorm_forward_lowp", [=] { cpu_.layernorm_forward_lowp(x, g, b, r, c, eps, y, mean, rstd); });
  }
  void layernorm_backward_lowp(const lowp16* dy, const lowp16* x, const lowp16* g, const float* mean, const float* rstd,
                               int r, int c, lowp16* dx, bool acc_dx, lowp16* dg, lowp16* db, bool acc_p) override {
    queue("layernorm_backward_lowp",
          [=] { cpu_.layernorm_backward_lowp(dy, x, g, mean, rstd, r, c, dx, acc_dx, dg, db, acc_p); });
  }
  void gemm_batched_lowp(const GemmLowp& g, int n, int64_t sa, int64_t sb, int64_t sc) override {
    queue("gemm_batched_lowp", [=] { cpu_.gemm_batched_lowp(g, n, sa, sb, sc); });
  }
  void causal_softmax_forward_lowp(const lowp16* s, int bh, int t, float scale, lowp16* p) override {
    queue("causal_softmax_forward_lowp", [=] { cpu_.causal_softmax_forward_lowp(s, bh, t, scale, p); });
  }
  void causal_softmax_backward_lowp(const lowp16* p, const lowp16* dp, int bh, int t, float scale,
                                    lowp16* ds) override {
    queue("causal_softmax_backward_lowp", [=] { cpu_.causal_softmax_backward_lowp(p, dp, bh, t, scale, ds); });
  }
  void add_lowp(const lowp16* a, const lowp16* b, lowp16* y, size_t n) override {
    queue("add_lowp", [=] { cpu_.add_lowp(a, b, y, n); });
  }
  void rows_to_heads_lowp(const lowp16* rows, int stride, int b, int t, int nh, int hs, lowp16* out) override {
    queue("rows_to_heads_lowp", [=] { cpu_.rows_to_heads_lowp(rows, stride, b, t, nh, hs, out); });
  }
  void heads_to_rows_lowp(const lowp16* in, int b, int t, int nh, int hs, lowp16* rows, int stride) override {
    queue("heads_to_rows_lowp", [=] { cpu_.heads_to_rows_lowp(in, b, t, nh, hs, rows, stride); });
  }
  void attention_decode_lowp(const lowp16* q, int qs, const lowp16* k, const lowp16* v, int kvs, int nh, int hs,
                             int past, int n, float scale, lowp16* out, int os) override {
    queue("attention_decode_lowp",
          [=] { cpu_.attention_decode_lowp(q, qs, k, v, kvs, nh, hs, past, n, scale, out, os); });
  }
  void attention_forward_fused_lowp(const lowp16* q, const lowp16* k, const lowp16* v, int bh, int t, int hs,
                                    float scale, lowp16* out, float* lse) override {
    queue("attention_forward_fused_lowp",
          [=] { cpu_.attention_forward_fused_lowp(q, k, v, bh, t, hs, scale, out, lse); });
  }
  void attention_backward_fused_lowp(const lowp16* q, const lowp16* k, const lowp16* v, const lowp16* out,
                                     const float* lse, const lowp16* dout, int bh, int t, int hs, float scale,
                                     lowp16* dq, lowp16* dk, lowp16* dv) override {
    queue("attention_backward_fused_lowp",
          [=] { cpu_.attention_backward_fused_lowp(q, k, v, out, lse, dout, bh, t, hs, scale, dq, dk, dv); });
  }
  void softmax_xent_fused_rows(lowp16* l, const int32_t* lab, int r, int c, int real, int total, ScalarArg s,
                               float* row_loss) override {
    queue("softmax_xent_fused_rows", [=] { cpu_.softmax_xent_fused_rows(l, lab, r, c, real, total, s, row_loss); });
  }
  void loss_rows_mean(const float* row_loss, int r, float* loss) override {
    queue("loss_rows_mean", [=] { cpu_.loss_rows_mean(row_loss, r, loss); });
  }
  void mse_forward(const lowp16* p, const float* t, int r, int c, float* loss) override {
    queue("mse_forward", [=] { cpu_.mse_forward(p, t, r, c, loss); });
  }
  void mse_backward(const lowp16* p, const float* t, int r, int c, ScalarArg s, lowp16* d) override {
    queue("mse_backward", [=] { cpu_.mse_backward(p, t, r, c, s, d); });
  }
  void unscale_lowp_to_fp32(const lowp16* g, float* g32, size_t n, ScalarArg inv, int32_t* flag) override {
    queue("unscale_lowp_to_fp32", [=] { cpu_.unscale_lowp_to_fp32(g, g32, n, inv, flag); });
  }
  void unscale_fp32(const float* g, float* out, size_t n, ScalarArg inv, int32_t* flag) override {
    queue("unscale_fp32", [=] { cpu_.unscale_fp32(g, out, n, inv, flag); });
  }
  void l2_norm_fp32(const float* x, size_t n, float* norm) override {
    queue("l2_norm_fp32", [=] { cpu_.l2_norm_fp32(x, n, norm); });
  }
  void sgd_update(const SgdParams& p, const SgdGrads& g, float* m, float* mom, lowp16* w, size_t n,
                  const int32_t* skip) override {
    queue("sgd_update", [=] { cpu_.sgd_update(p, g, m, mom, w, n, skip); });
  }
  void adamw_update(const AdamWParams& p, const AdamWBuffers& b, ScalarArg inv, size_t offset, size_t n,
                    const int32_t* skip) override {
    queue("adamw_update", [=] { cpu_.adamw_update(p, b, inv, offset, n, skip); });
  }
  void step_status_prepare(StepStatus* s, double bd, double ud, float lr) override {
    queue("step_status_prepare", [=] { cpu_.step_status_prepare(s, bd, ud, lr); });
  }
  void step_status_finish(const LossScaleRule& r, StepStatus* s) override {
    queue("step_status_finish", [=] { cpu_.step_status_finish(r, s); });
  }

  bool supports_capture() const override { return can_capture_; }
  void begin_capture() override {
    if (!can_capture_ || capturing_) Backend::begin_capture();
    capturing_ = true;
    tapes_.emplace_back();
  }
  int end_capture() override {
    if (!capturing_) Backend::end_capture();
    capturing_ = false;
    return static_cast<int>(tapes_.size()) - 1;
  }
  void replay(int recording) override {
    refuse_in_capture("replay");
    for (const auto& op : tapes_.at(static_cast<size_t>(recording))) op();
    ++replays;
  }

 private:
  void queue(const char* name, std::function<void()> op) {
    if (on_operation) on_operation(name);
    if (capturing_) {
      if (!run_eagerly_.count(name)) first_seen_in_capture.push_back(name);
      tapes_.back().push_back(std::move(op));
    } else {
      run_eagerly_.insert(name);
      op();
    }
  }
  void refuse_in_capture(const char* what) const {
    if (capturing_) throw Error(std::string(what) + " inside a step capture");
  }

  CpuBackend cpu_;
  DeviceKind kind_;
  bool can_capture_;
  bool capturing_ = false;
  std::vector<std::vector<std::function<void()>>> tapes_;
  std::set<std::string> run_eagerly_;
};

}  // namespace ddp
