// Model presets (design/replay.md §6): per-layer shapes of the models the
// library targets, shared by `replayssm verify`, the CPU bench and the GPU
// bench. Header-only; no dependency beyond the standard library.
//
// Shapes are per layer at TP = 1. tp_shard() gives the per-rank shape at
// TP = k (heads and groups divided by k). State bytes per row per layer:
//   Mamba-2  H·P·N·s        GDN / KDA  HV·V·K·s        (s = bytes per element)
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace replayssm::tools {

enum class Family : int8_t { mamba2, gdn, kda };

inline const char* family_name(Family f) {
  switch (f) {
    case Family::mamba2: return "mamba2";
    case Family::gdn: return "gdn";
    case Family::kda: return "kda";
  }
  return "?";
}

inline bool parse_family(std::string_view s, Family& out) {
  if (s == "mamba2") { out = Family::mamba2; return true; }
  if (s == "gdn") { out = Family::gdn; return true; }
  if (s == "kda") { out = Family::kda; return true; }
  return false;
}

// One per-layer shape. Mamba-2 uses H, P, N, G; GDN / KDA use H, HV, K, V
// (KDA: HV = H). Unused fields are 0.
struct Preset {
  const char* name;   // CLI name, e.g. "qwen35"
  const char* model;  // the model it comes from
  Family family;
  int64_t H, P, N, G;  // Mamba-2: heads, head dim, d_state, groups; GDN/KDA: H = key heads
  int64_t HV, K, V;    // GDN/KDA: value heads, key dim, value dim
  int64_t L;           // default history capacity
  bool main;           // one of the three headline presets ("all" in the bench)
};

// The table. The first preset of each family is its headline preset.
inline constexpr Preset PRESETS[] = {
    // GDN (Qwen3.5 / Qwen3-Next): H = 16, HV ∈ {32, 48, 64}, K = V = 128.
    {"qwen35", "Qwen3.5-4B / Qwen3-Next-80B (GDN)", Family::gdn, 16, 0, 0, 0, 32, 128, 128, 16, true},
    {"qwen35-hv48", "GDN, HV = 48", Family::gdn, 16, 0, 0, 0, 48, 128, 128, 16, false},
    {"qwen35-122b", "Qwen3.5-122B-A10B (GDN)", Family::gdn, 16, 0, 0, 0, 64, 128, 128, 16, false},
    // Mamba-2 (Nemotron-3): (H, P) ∈ {(96, 80), (64, 64), (128, 64), (256, 64)}, N = 128, G = 8.
    {"nemotron3", "Nemotron-3-Super-120B (Mamba-2)", Family::mamba2, 128, 64, 128, 8, 0, 0, 0, 16, true},
    {"nemotron3-nano", "Nemotron-3-Nano-4B (Mamba-2)", Family::mamba2, 96, 80, 128, 8, 0, 0, 0, 16, false},
    {"nemotron3-h64", "Mamba-2, H = 64, P = 64", Family::mamba2, 64, 64, 128, 8, 0, 0, 0, 16, false},
    {"nemotron-ultra", "Nemotron-Ultra-550B (Mamba-2)", Family::mamba2, 256, 64, 128, 8, 0, 0, 0, 16, false},
    // KDA (Kimi Linear): H = HV = 32, K = V = 128.
    {"kimi", "Kimi-Linear (KDA)", Family::kda, 32, 0, 0, 0, 32, 128, 128, 16, true},
};

// "H128-P64-N128-G8" (Mamba-2) or "H16-HV64-K128-V128" (GDN/KDA), as in design §7.
inline std::string shape_str(const Preset& p) {
  char buf[96];
  if (p.family == Family::mamba2)
    std::snprintf(buf, sizeof buf, "H%lld-P%lld-N%lld-G%lld", (long long)p.H, (long long)p.P,
                  (long long)p.N, (long long)p.G);
  else
    std::snprintf(buf, sizeof buf, "H%lld-HV%lld-K%lld-V%lld", (long long)p.H, (long long)p.HV,
                  (long long)p.K, (long long)p.V);
  return buf;
}

// State elements per row per layer: H·P·N or HV·V·K.
inline int64_t state_elems(const Preset& p) {
  return p.family == Family::mamba2 ? p.H * p.P * p.N : p.HV * p.V * p.K;
}

// Per-rank shape at tensor parallelism tp (heads and groups split evenly;
// every preset divides by 1, 2, 4 and 8). Returns false when it does not divide.
inline bool tp_shard(const Preset& p, int64_t tp, Preset& out) {
  out = p;
  if (tp <= 1) return true;
  if (p.H % tp) return false;
  out.H = p.H / tp;
  if (p.family == Family::mamba2) {
    if (p.G % tp) return false;
    out.G = p.G / tp;
  } else {
    if (p.HV % tp) return false;
    out.HV = p.HV / tp;
  }
  return true;
}

// ---- traffic model of design §6 (bytes_per_step of design §7) ---------------
//
// Per row and token, with s = state element size, a = activation size:
//   Mamba-2  io     = x H·P·a + dt H·4 + B, C 2·G·N·a + y H·P·a (+ z H·P·a when used)
//            record = x H·P·a + δ H·4 + B G·N·a
//   GDN/KDA  io     = q, k 2·H·K·a + v HV·V·a + g (GDN HV·4, KDA HV·K·4) + β HV·4 + o HV·V·a
//            record = d HV·V·d_size + k H·K·a + ks H·4 + g (GDN HV·4, KDA HV·K·4)
// Per-head parameters (A, D, dt_bias, A_log) are shared by all rows and left out.
struct TokenBytes {
  double state;   // |S| per row
  double io;      // inputs + outputs per token
  double record;  // one ring record per token
};

inline TokenBytes token_bytes(const Preset& p, int64_t s, int64_t a, int64_t d_size = 4,
                              bool with_z = false) {
  TokenBytes t;
  t.state = double(state_elems(p) * s);
  if (p.family == Family::mamba2) {
    t.io = double(p.H * p.P * a * (with_z ? 3 : 2) + p.H * 4 + 2 * p.G * p.N * a);
    t.record = double(p.H * p.P * a + p.H * 4 + p.G * p.N * a);
  } else {
    const int64_t g = p.family == Family::kda ? p.HV * p.K * 4 : p.HV * 4;
    t.io = double(2 * p.H * p.K * a + 2 * p.HV * p.V * a + g + p.HV * 4);
    t.record = double(p.HV * p.V * d_size + p.H * p.K * a + p.H * 4 + g);
  }
  return t;
}

// Averages per step of a replay run with T tokens per step and a accepted per
// step (plain decode: T = a = 1), over many whole cycles, following the ring
// rule of design §2 (flush when count + T > L).
struct ReplayCycle {
  double flush_share;   // fraction of steps that flush (write the checkpoint)
  double hist_records;  // committed records the outputs read per step
  double fold_records;  // records folded per step (read by the flush)
};

inline ReplayCycle replay_cycle(int64_t L, int64_t T, int64_t a) {
  int64_t count = 0, flushes = 0, hist = 0, fold = 0;
  const int64_t warm = 4 * L, steps = 1000 * L;  // skip the first, flush-free cycle
  for (int64_t i = 0; i < warm + steps; ++i) {
    const bool counted = i >= warm;
    if (count + T > L) {
      flushes += counted;
      fold += counted ? count : 0;
      count = 0;
    }
    hist += counted ? count : 0;
    count += a;
  }
  return {double(flushes) / double(steps), double(hist) / double(steps), double(fold) / double(steps)};
}

// Modelled bytes per row per step. Baseline: 2|S| + T·io (one state write per
// step; the snapshot form writes T states: pass state_writes = T).
inline double baseline_bytes(const TokenBytes& b, int64_t T, int64_t state_writes = 1) {
  return b.state * double(1 + state_writes) + double(T) * b.io;
}
// Replay: (1 + flush_share)|S| + T·(io + record) + (hist + fold)·record.
inline double replay_bytes(const TokenBytes& b, int64_t T, const ReplayCycle& c) {
  return b.state * (1.0 + c.flush_share) + double(T) * (b.io + b.record) +
         (c.hist_records + c.fold_records) * b.record;
}

inline const Preset* find_preset(std::string_view name) {
  for (const Preset& p : PRESETS)
    if (name == p.name) return &p;
  return nullptr;
}

// "all" → the headline presets; a family name → every preset of the family;
// otherwise one preset by name. Empty when nothing matches.
inline std::vector<Preset> select_presets(std::string_view sel) {
  std::vector<Preset> out;
  Family f;
  const bool by_family = parse_family(sel, f);
  for (const Preset& p : PRESETS) {
    if (sel == "all" ? p.main : by_family ? p.family == f : sel == p.name) out.push_back(p);
  }
  return out;
}

}  // namespace replayssm::tools
