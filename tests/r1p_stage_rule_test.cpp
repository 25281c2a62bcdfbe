// The persistent T = 1 stream's stage cap (delta/heuristics.h r1p_stage_cap)
// at the sweeps of the model shapes it was measured on (H100 against H200
// bandwidth; experiments/2026-12-05_t41/README.md).
#include <cstdint>
#include <gtest/gtest.h>

#include "delta/heuristics.h"

namespace {

using replayssm::delta::cuda_impl::r1p_stage_cap;

constexpr int MAX = 8;
constexpr double H100 = 3352.0, H200 = 4915.0;  // GB/s, memory clock × bus width
constexpr int64_t KiB = 1024;

TEST(R1PStageRule, LowerBandwidthKeepsFewerStages) {
  EXPECT_EQ(r1p_stage_cap(32 * KiB, false, H100, MAX), 2);           // GDN HV64 bf16
  EXPECT_EQ(r1p_stage_cap(16 * KiB, false, H100, MAX), 4);           // KDA bf16
  EXPECT_EQ(r1p_stage_cap(128 * 128 + 128 * 4, false, H100, MAX), 4);  // fp8 copy, one value head
  EXPECT_EQ(r1p_stage_cap(128 * 64 + 128 * 8 + 16, false, H100, MAX), 8);  // nvfp4 copy: as before
  EXPECT_EQ(r1p_stage_cap(64 * KiB, false, H100, MAX), 2);           // never fewer than two
}

TEST(R1PStageRule, Fp32StatesKeepTheDefault) {  // KDA fp32's 32 KiB sweeps: slower at two
  EXPECT_EQ(r1p_stage_cap(32 * KiB, true, H100, MAX), MAX);
  EXPECT_EQ(r1p_stage_cap(32 * KiB, true, H200, MAX), MAX);
}

TEST(R1PStageRule, H200AndUnknownKeepTheDefault) {
  for (int64_t swb : {16 * KiB, 32 * KiB, 64 * KiB}) {
    EXPECT_EQ(r1p_stage_cap(swb, false, H200, MAX), MAX) << swb;
    EXPECT_EQ(r1p_stage_cap(swb, false, 0.0, MAX), MAX) << swb;
  }
}

}  // namespace
