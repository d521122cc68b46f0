// test_checkpoint_write_fault.cpp: DDP_TEST_CHECKPOINT_WRITE, the test hook
// that holds or fails a checkpoint write half-way (fault_hooks.h): its
// values, a one-line refusal of any other, and a hook only for its step.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <string>

#include "kernels/error.h"
#include "trainer/loop/fault_hooks.h"

namespace ddp {
namespace {

// Sets the variable for one case and restores what was there.
class FaultVariable {
 public:
  explicit FaultVariable(const char* value) {
    if (const char* old = std::getenv(kName)) saved_ = old;
    had_ = std::getenv(kName) != nullptr;
    if (value)
      setenv(kName, value, 1);
    else
      unsetenv(kName);
  }
  ~FaultVariable() {
    if (had_)
      setenv(kName, saved_.c_str(), 1);
    else
      unsetenv(kName);
  }

 private:
  static constexpr const char* kName = "DDP_TEST_CHECKPOINT_WRITE";
  std::string saved_;
  bool had_ = false;
};

TEST(CheckpointWriteFault, UnsetOrEmptyIsNone) {
  for (const char* value : {static_cast<const char*>(nullptr), ""}) {
    const FaultVariable v(value);
    const CheckpointWriteFault fault = checkpoint_write_fault_from_env();
    EXPECT_EQ(fault.kind, CheckpointWriteFault::Kind::None);
    EXPECT_FALSE(checkpoint_write_hook(fault, 0));
  }
}

TEST(CheckpointWriteFault, HoldAndFailNameTheirStep) {
  {
    const FaultVariable v("hold:4");
    const CheckpointWriteFault fault = checkpoint_write_fault_from_env();
    EXPECT_EQ(fault.kind, CheckpointWriteFault::Kind::Hold);
    EXPECT_EQ(fault.step, 4);
    EXPECT_TRUE(checkpoint_write_hook(fault, 4));
    EXPECT_FALSE(checkpoint_write_hook(fault, 3));
  }
  const FaultVariable v("fail:12");
  const CheckpointWriteFault fault = checkpoint_write_fault_from_env();
  EXPECT_EQ(fault.kind, CheckpointWriteFault::Kind::Fail);
  EXPECT_EQ(fault.step, 12);
  const MidWriteHook hook = checkpoint_write_hook(fault, 12);
  ASSERT_TRUE(hook);
  EXPECT_EQ(hook(), EIO);
  EXPECT_FALSE(checkpoint_write_hook(fault, 11));
}

TEST(CheckpointWriteFault, AnyOtherValueIsOneLine) {
  for (const char* value : {"hold", "hold:", "hold:x", "hold:4x", "stop:4", "fail:-1", ":4", "fail:4:5"}) {
    SCOPED_TRACE(value);
    const FaultVariable v(value);
    try {
      checkpoint_write_fault_from_env();
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_EQ(message,
                std::string("DDP_TEST_CHECKPOINT_WRITE='") + value + "' is not hold:STEP, fail:STEP or slow:STEP (a test hook)");
    }
  }
}

}  // namespace
}  // namespace ddp
