// Tensor::device_index against the current CUDA device (core/check.h): a
// cuda tensor stating another device than the current one is rejected,
// naming the argument and both devices; an unstated device (-1) or an
// unknown current device (-1: no CUDA, no GPU) is not checked.
#include <gtest/gtest.h>

#include <string>

#include "core/check.h"

namespace {
using namespace replayssm;

Tensor cuda_tensor(int device_index) {
  Tensor t = Tensor::view(reinterpret_cast<void*>(uintptr_t(256)), DType::f32, {4}, Device::cuda);
  t.device_index = device_index;
  return t;
}

TEST(DeviceIndex, AnotherDeviceIsRejectedNamingTheArgument) {
  try {
    check::device_index("mamba2_replay_step", "x", cuda_tensor(1), 0);
    FAIL() << "a tensor on cuda:1 passed with cuda:0 current";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "x");
    const std::string w = e.what();
    EXPECT_NE(w.find("cuda:0"), std::string::npos) << w;
    EXPECT_NE(w.find("cuda:1"), std::string::npos) << w;
  }
  EXPECT_NO_THROW(check::device_index("f", "x", cuda_tensor(1), 1));
  EXPECT_NO_THROW(check::device_index("f", "x", cuda_tensor(-1), 0));  // not stated
  EXPECT_NO_THROW(check::device_index("f", "x", cuda_tensor(1), -1));  // current unknown
}

// check::device applies it for the cuda backend with the current device
// (on a machine without a GPU: unknown, so nothing is rejected).
TEST(DeviceIndex, CheckDeviceUsesTheCurrentDevice) {
  Exec e;
  e.backend = Backend::cuda;
  const int cur = check::current_cuda_device();
  EXPECT_NO_THROW(check::device("f", "x", cuda_tensor(cur < 0 ? 3 : cur), e));
  if (cur >= 0) EXPECT_THROW(check::device("f", "x", cuda_tensor(cur + 1), e), Error);
}

}  // namespace
