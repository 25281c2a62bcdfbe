// The rule that makes a T = 1 replay step eager at small batches
// (core/eager.h with each family's EAGER_MAX_ROWS / EAGER_MAX_BYTES), at the
// model shapes it was measured on (bench/results/2026-12-03_h200_eager_steps.jsonl),
// and its override.
#include <cstdlib>
#include <string>
#include <gtest/gtest.h>

#include "core/eager.h"
#include "delta/heuristics.h"
#include "mamba2/heuristics.h"

namespace {

using replayssm::eager_step;

struct EnvOverride {  // REPLAYSSM_EAGER_ROWS for the object's lifetime (unset: the rule)
  explicit EnvOverride(const char* v) {
    if (const char* o = std::getenv("REPLAYSSM_EAGER_ROWS")) old = o, had = true;
    if (v) setenv("REPLAYSSM_EAGER_ROWS", v, 1);
    else unsetenv("REPLAYSSM_EAGER_ROWS");
  }
  ~EnvOverride() {
    if (had) setenv("REPLAYSSM_EAGER_ROWS", old.c_str(), 1);
    else unsetenv("REPLAYSSM_EAGER_ROWS");
  }
  std::string old;
  bool had = false;
};

constexpr int64_t MiB = int64_t(1) << 20;

bool delta_eager(int64_t B, int64_t row_bytes) {
  namespace h = replayssm::delta::cuda_impl;
  return eager_step(B, row_bytes, h::EAGER_MAX_ROWS, h::EAGER_MAX_BYTES);
}
bool mamba2_eager(int64_t B, int64_t row_bytes, int64_t elem_bytes = 4) {
  return replayssm::mamba2::eager_by_rule(B, row_bytes / elem_bytes, elem_bytes);
}

TEST(EagerRule, ModelShapes) {
  EnvOverride rule(nullptr);
  // GDN HV64 K = V = 128: fp32 4 MiB a row, bf16 2 MiB: eager up to 3 rows
  for (int64_t B : {1, 2, 3}) EXPECT_TRUE(delta_eager(B, 4 * MiB)) << B;
  EXPECT_FALSE(delta_eager(4, 4 * MiB));
  for (int64_t B : {1, 2, 3}) EXPECT_TRUE(delta_eager(B, 2 * MiB)) << B;
  EXPECT_FALSE(delta_eager(4, 2 * MiB));
  EXPECT_FALSE(delta_eager(2, 8 * MiB));  // larger states: the replay kernel
  // KDA 32 heads × 128: fp32 2 MiB, bf16 1 MiB: eager up to 3 rows
  for (int64_t B : {1, 2, 3}) EXPECT_TRUE(delta_eager(B, 1 * MiB)) << B;
  EXPECT_FALSE(delta_eager(4, 1 * MiB));
  // Mamba-2 H128 P64 N128: fp32 4 MiB (1 row), bf16 2 MiB (3 rows: 16-bit
  // states up to 6 MiB)
  EXPECT_TRUE(mamba2_eager(1, 4 * MiB));
  EXPECT_FALSE(mamba2_eager(2, 4 * MiB));
  for (int64_t B : {1, 2, 3}) EXPECT_TRUE(mamba2_eager(B, 2 * MiB, 2)) << B;
  EXPECT_FALSE(mamba2_eager(4, 2 * MiB, 2));
  EXPECT_FALSE(mamba2_eager(2, 4 * MiB, 2));  // H256 bf16: 8 MiB at two rows
  EXPECT_FALSE(mamba2_eager(3, 2 * MiB, 4));  // the same bytes in fp32: 4 MiB at most
  EXPECT_FALSE(mamba2_eager(256, 1024));
}

TEST(EagerRule, Override) {
  {
    EnvOverride never("0");
    EXPECT_FALSE(delta_eager(1, 1024));
    EXPECT_FALSE(mamba2_eager(1, 1024));
  }
  EnvOverride eight("8");
  EXPECT_TRUE(delta_eager(8, 64 * MiB));
  EXPECT_FALSE(delta_eager(9, 1024));
  EXPECT_TRUE(mamba2_eager(8, 64 * MiB));
}

}  // namespace
