#include <gtest/gtest.h>
#include "core/ring.h"
#include "replayssm/types.h"
TEST(Ring, PlanFlushes) {
  replayssm::RingCursor c{3, 16, 0};
  auto p = replayssm::ring_plan_step(c, 1, 16, 17);
  EXPECT_TRUE(p.flush);
  EXPECT_EQ(p.next.start, 2);
  EXPECT_EQ(p.append_start, 2);
}
