// test_op_dispatch.cpp: how an op's entry point reaches a row
// (kernels/ops/op_dispatch.h): the CPU backend's rows run at once; a
// backend that forwards gets the op's name and a call holding a copy of
// its arguments, which runs the op on whichever backend it is given, as
// often as asked; a backend that runs no ops refuses by the op's name.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/buffer.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/ops/elementwise.h"
#include "support/lowp_format.h"
#include "support/test_support.h"

namespace ddp {
namespace {

// Takes every op and keeps it: the shape of the tests' RecordingBackend.
class KeepingBackend final : public Backend, private OpForwarder {
 public:
  explicit KeepingBackend(bool forwards) {
    if (forwards) set_op_rows({nullptr, nullptr, this});
  }
  std::vector<std::string> names;
  std::vector<std::function<void(Backend&)>> calls;

  DeviceKind kind() const override { return DeviceKind::Cpu; }
  std::string description() const override { return "keeping backend"; }
  void* allocate_bytes(size_t) override { return nullptr; }
  void free_bytes(void*) noexcept override {}
  void copy_to_device(void*, const void*, size_t) override {}
  void copy_to_host(void*, const void*, size_t) override {}
  void copy_on_device(void*, const void*, size_t) override {}
  void fill_zero(void*, size_t) override {}
  void synchronize() override {}
  std::unique_ptr<UploadSlots> make_upload_slots(size_t) override { return nullptr; }

 private:
  void forward_op(const char* name, std::function<void(Backend&)> call) override {
    names.push_back(name);
    calls.push_back(std::move(call));
  }
};

TEST(OpDispatch, AForwardedOpRunsItsFrozenArgumentsOnTheBackendItIsGiven) {
  std::mt19937_64 rng(test::test_seed());
  const test::LowpFormat fmt{Precision::Fp16};
  CpuBackend cpu(1);
  const size_t count = 100;
  const std::vector<lowp16> a = fmt.random(rng, count), b = fmt.random(rng, count);
  Buffer<lowp16> da(cpu, count), db(cpu, count), y(cpu, count);
  da.upload(a);
  db.upload(b);
  y.upload(test::LowpFormat::poison(count));

  KeepingBackend keeping(true);
  AddLowp add;
  add.a = da.data();
  add.b = db.data();
  add.y = y.data();
  add.count = count;
  add_lowp(keeping, add);
  add.count = 0;  // the call holds its own copy: this changes nothing
  ASSERT_EQ(keeping.names, std::vector<std::string>{"add_lowp"});
  EXPECT_EQ(y.download()[0].bits, test::LowpFormat::poison(1)[0].bits) << "a forwarded op does not run";

  keeping.calls[0](cpu);
  const std::vector<lowp16> got = y.download();
  for (size_t i = 0; i < count; ++i)
    ASSERT_EQ(got[i].bits, fmt.narrow(fmt.widen(a[i]) + fmt.widen(b[i])).bits) << "element " << i;
}

TEST(OpDispatch, ABackendThatRunsNoOpsRefusesByTheOpsName) {
  KeepingBackend none(false);
  CastFp32ToLowp cast;
  try {
    cast_fp32_to_lowp(none, cast);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cast_fp32_to_lowp"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("keeping backend"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ddp
