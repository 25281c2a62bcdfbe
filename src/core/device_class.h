// The bandwidth class of a device, for the launch rules (host-only, plain
// C++). The kernels' defaults were measured on the H200 (4.8 TB/s peak
// memory bandwidth); a few rules choose otherwise on slower devices such as
// the H100 (3.35 TB/s): delta heuristics.h r1p_stage_cap (the persistent
// step's stages), r1p_by_default / r1p_dual_by_default (whether it is
// taken) and mamba2 heuristics.h replay1_sweep_prefetch (the T = 1
// sweep-ahead prefetch).
#pragma once

namespace replayssm {

inline constexpr double H200_CLASS_GBPS = 4000.0;
// Whether a device of this peak bandwidth (GB/s; 0 when the driver did not
// report it) takes the defaults measured on the H200.
inline bool h200_class(double peak_gbps) { return !(peak_gbps > 0.0) || peak_gbps >= H200_CLASS_GBPS; }

}  // namespace replayssm
