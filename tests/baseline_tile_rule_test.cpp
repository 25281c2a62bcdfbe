// The baseline decode kernels' tiles at the model shapes they were measured
// on (bench/results/2026-12-04_h200_baseline_tiles_sweep.jsonl; H200, 132
// SMs): GDN / KDA blocks of two stage rounds for fp32 states, four for 16-bit
// ones (delta/heuristics.h decode1_stage_rounds); Mamba-2 blocks of
// DECODE_PASSES passes (mamba2/heuristics.h).
#include <cstdint>
#include <gtest/gtest.h>

#include "delta/heuristics.h"
#include "mamba2/heuristics.h"

namespace {

constexpr int SMS = 132;

replayssm::delta::cuda_impl::DecodeTile delta_tile(int64_t B, int64_t H, int64_t HV, bool kda, int state_size) {
  using namespace replayssm::delta::cuda_impl;
  const int lpr = lanes_per_row(128);
  return decode1_tile(B, H, HV / H, 128, lpr, state_size, SMS, kda, decode1_stage_rounds(state_size));
}

TEST(BaselineTileRule, DeltaDecodeHeadsPerBlock) {
  using replayssm::delta::cuda_impl::decode1_stage_rounds;
  EXPECT_EQ(decode1_stage_rounds(4), 2);
  EXPECT_EQ(decode1_stage_rounds(2), 4);
  for (int64_t B : {64, 256, 512}) {
    SCOPED_TRACE(B);
    auto g = delta_tile(B, 16, 64, false, 4);  // GDN HV64 fp32: two of a key head's four value heads
    EXPECT_EQ(g.nh, 2);
    EXPECT_EQ(g.vt, 128);
    EXPECT_EQ(g.kpb, 1);
    auto k = delta_tile(B, 32, 32, true, 4);  // KDA fp32: two heads, each its own key head
    EXPECT_EQ(k.nh, 2);
    EXPECT_EQ(k.kpb, 2);
    EXPECT_EQ(delta_tile(B, 16, 64, false, 2).nh, 4);  // GDN bf16: the key head's four
    // KDA bf16: eight heads (four at B = 64, where eight leave fewer than two blocks per SM)
    EXPECT_EQ(delta_tile(B, 32, 32, true, 2).nh, B == 64 ? 4 : 8);
    EXPECT_EQ(delta_tile(B, 16, 48, false, 4).nh, 1);  // GDN HV48 (G = 3) fp32: 3 · 128 rows > 256
    EXPECT_EQ(delta_tile(B, 16, 32, false, 4).nh, 2);  // GDN HV32 (G = 2)
  }
  // small batches still split toward two blocks per SM
  EXPECT_EQ(delta_tile(1, 16, 64, false, 4).nh, 1);
}

TEST(BaselineTileRule, Mamba2DecodeHeadsPerBlock) {
  using namespace replayssm::mamba2;
  EXPECT_EQ(DECODE_BLOCKS_PER_SM, 3);
  const RowGeometry g = hot_geometry(128, replayssm::DType::f32);
  const int rpp = rows_per_pass(g, 1);
  EXPECT_EQ(rpp, 32);
  auto smem = [](int64_t, int64_t) { return int64_t(4096); };
  for (int64_t B : {64, 256, 512}) {
    SCOPED_TRACE(B);
    // Nemotron-3 H128 · P64 (G = 8, 16 heads per group): four heads of 64 rows
    const Tile t = choose_tile(B, 128, 8, 64, rpp, SMS, smem, int64_t(DECODE_PASSES) * rpp);
    EXPECT_EQ(t.nh, 4);
    EXPECT_EQ(t.np, 64);
    EXPECT_EQ(t.blocks, B * 8 * 4);
  }
}

}  // namespace
