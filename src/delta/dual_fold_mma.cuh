// The dual fold (dual_fold.cuh) on tensor cores, for K = 128, V % 16 == 0
// and state rows whose 4-element groups are aligned (delta_launch.cu::
// dual_fold_mma_fits); same grid, same plan, the same copy bytes (packed
// from the rows' registers when V <= 128, pack_row_quad; else re-read).
//
// The committed records are taken in chunks of FOLD_CH = 16 (Λ summed from
// the chunk's start c0, all exponents ≤ 0 for decaying gates). Per chunk and
// state row v, the sequential recurrence of dual_fold.cuh is its triangular
// form (design §3):
//   P_j = S_{c0}[v]·(e^{Λ_j} ⊙ k̂_j),
//   M_{j,i} = (e^{Λ_j − Λ_i} ⊙ k̂_i)·k̂_j   (i < j, per block, shared by the rows),
//   d_j = β_j (v_j[v] − P_j − Σ_{i<j} M_{j,i} d_i), rounded to ring_d's dtype,
//   S_{c1}[v] = e^{Λ_{c1−1}} ⊙ S_{c0}[v] + Σ_j d_j (e^{Λ_{c1−1} − Λ_j} ⊙ k̂_j),
// equal to the sequential form up to rounding. A warp owns tiles of 16 rows
// (rows g, g + 8 of lane (g, t4) in registers, columns 16c + 4·t4 + e, as
// the speculative stream of replay.cuh); P = S·Wᵀ and the fold D·F are
// m16n8k8 tf32 products with both operands split hi + lo (3xTF32), the
// 16 × 16 solve runs across each quad by shuffles (record j finished by lane
// (j mod 8) / 2, broadcast to the quad), and the fold's accumulators are
// the rows' own registers (the B operand's column n of column group c is
// 16c + 4·(n >> 1) + 2·nt + (n & 1)).
// GDN's gates are scalars per value head, so its W and F are k̂ itself (made
// and split once per key head, with the Gram k̂_i·k̂_j, and kept for the
// block's next value heads of that key head): P_j = e^{Λ_j}(S·k̂_j) and
// D's column j scaled by e^{Λ_{c1−1} − Λ_j} before its split.
#pragma once
#include "delta/dual_fold.cuh"

namespace replayssm::delta::cuda_impl {

inline constexpr int FOLD_MMA_K = 128;
inline constexpr int FOLD_CH = 16;                   // records per chunk: two 8-record n-tiles / k-steps
inline constexpr int FOLD_WBP = FOLD_MMA_K / 2 + 1;  // 16-byte units per W row (odd: conflict-free fragment loads)
inline constexpr int FOLD_FBS = 12;                  // 16-byte units per F column (8 used; 12 ≡ 4 mod 8: conflict-free)
// Shared memory of one block for two resident blocks per SM (L = 16: 66 KiB
// for KDA; longer rings take the CUDA-core fold).
inline constexpr int64_t DUAL_FOLD_MMA_SMEM_CAP = 113 * 1024;

// Shared memory of the tensor-core fold, byte offsets: the B operands
// already split, W as [chunk][record][column pair] units {hi_2p, hi_2p+1,
// lo_2p, lo_2p+1}, F as [chunk][column][k-step·4 + t4] units {hi_r, hi_r+4,
// lo_r, lo_r+4} (r = 8·k-step + t4); then k̂, g, E, M, β, v as floats; GDN
// also the chunk's Gram k̂_i·k̂_j (kept across the value heads of a key head)
// and the record scales e^{Λ_j}, e^{Λ_{c1−1} − Λ_j} of the head.
struct FoldMmaLayout {
  int64_t wb, fb, kh, g, e, m, bt, vj, gr, ew, ef, bytes;
};
__host__ __device__ inline FoldMmaLayout dual_fold_mma_layout(bool kda, int V, int L) {
  FoldMmaLayout l{};
  const int64_t nch = (L + FOLD_CH - 1) / FOLD_CH, K = FOLD_MMA_K;
  int64_t o = 0;
  l.wb = o; o += nch * FOLD_CH * FOLD_WBP * 16;
  l.fb = o; o += nch * K * FOLD_FBS * 16;
  l.kh = o; o += align4(int64_t(L) * K) * 4;
  l.g = o; o += (kda ? align4(int64_t(L) * K) : align4(L)) * 4;
  l.e = o; o += nch * K * 4;
  l.m = o; o += align4(int64_t(L) * FOLD_CH) * 4;
  l.bt = o; o += align4(L) * 4;
  l.vj = o; o += align4(int64_t(L) * V) * 4;
  l.gr = l.ew = l.ef = o;
  if (!kda) {
    l.gr = o; o += nch * FOLD_CH * FOLD_CH * 4;
    l.ew = o; o += nch * FOLD_CH * 4;
    l.ef = o; o += nch * FOLD_CH * 4;
  }
  l.bytes = o;
  return l;
}

template <DType SD, bool KDA>
__global__ void __launch_bounds__(DUAL_THREADS, 2) delta_dual_fold_mma_kernel(DualArgs a) {
  using cuda_util::ld4;
  using cuda_util::mma_tf32x3;
  using cuda_util::st4;
  using cuda_util::tf32_split;
  using TS = typename Traits<SD>::type;
  constexpr int K = FOLD_MMA_K;
  extern __shared__ float4 smem4[];
  char* const smc = reinterpret_cast<char*>(smem4);
  const Rings& rg = a.rings;
  const int V = a.V;
  const int b = blockIdx.y;
  const int hv_lo = blockIdx.x * a.hpb, hv_hi = min(a.HV, hv_lo + a.hpb);
  const int tid = threadIdx.x, nthr = blockDim.x, warp = tid / 32, lane32 = tid % 32, nwarps = nthr / 32;
  const bool mat = a.op == DUAL_MATERIALIZE;
  const bool pack = dual_fold_packs(a.op);
  FoldPlan fp;
  dual_fold_stamp(a, 0);
  if (a.op == DUAL_STEP) {
    // A step's plan reports nothing and writes nothing: one thread reads the
    // cursor for the block (most blocks of a step do not flush, and every
    // warp planning them was ~10 % of the kernel's instructions).
    __shared__ FoldPlan sfp;
    __shared__ int sgo;
    if (tid == 0) {
      sgo = dual_fold_plan(a, b, hv_lo, hv_hi, fp);
      sfp = fp;
    }
    __syncthreads();
    dual_fold_stamp(a, 1);
    dual_fold_stamp(a, 15, dual_fold_smid() | (unsigned long long)(sgo ? 1 : 0) << 32);
    if (!sgo) {
      dual_fold_stamp(a, 14);
      return;
    }
    fp = sfp;
  } else if (!dual_fold_plan(a, b, hv_lo, hv_hi, fp)) {
    return;
  }
  // Every block has read its cursor: the T = 1 dual replay (a programmatic
  // dependent, delta_launch.cu) may start; its flushing rows wait for this grid.
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  const int64_t s = fp.s;
  const int start = fp.start, count = fp.count;
  const int L = rg.cur ? rg.L : 0;
  const FoldMmaLayout fl = dual_fold_mma_layout(KDA, V, L);
  uint32_t* const WB = reinterpret_cast<uint32_t*>(smc + fl.wb);
  uint32_t* const FB = reinterpret_cast<uint32_t*>(smc + fl.fb);
  float* const KH = reinterpret_cast<float*>(smc + fl.kh);  // [L][K] k̂_j
  float* const GJ = reinterpret_cast<float*>(smc + fl.g);   // g_j: KDA [L][K], GDN [L]
  float* const E = reinterpret_cast<float*>(smc + fl.e);    // [chunk][K] e^{Λ_{c1−1}}
  float* const M = reinterpret_cast<float*>(smc + fl.m);    // [L][FOLD_CH] M_{j, i − c0}
  float* const BT = reinterpret_cast<float*>(smc + fl.bt);  // [L] β_j
  float* const VJ = reinterpret_cast<float*>(smc + fl.vj);  // [L][V] v_j
  float* const GR = reinterpret_cast<float*>(smc + fl.gr);  // GDN [chunk][j][i] k̂_i·k̂_j
  float* const EW = reinterpret_cast<float*>(smc + fl.ew);  // GDN [chunk][j] e^{Λ_j}
  float* const EF = reinterpret_cast<float*>(smc + fl.ef);  // GDN [chunk][j] e^{Λ_{c1−1} − Λ_j}
  const int nch = (count + FOLD_CH - 1) / FOLD_CH;
  const int g = lane32 >> 2, t4 = lane32 & 3, qb = lane32 & ~3;
  const int ntiles = V / 16;

  // The copy is packed from the rows' registers when every warp holds at most
  // one tile (V <= 16 · warps): no barrier, no second read of the checkpoint.
  const bool reg_pack = pack && count > 0 && ntiles <= nwarps;
  for (int hv = hv_lo; hv < hv_hi; ++hv) {  // uniform over the block
    const int kh = hv / a.G;
    // GDN: the keys, their split B operands and their Gram are the key
    // head's, made at its block's first value head and kept for the next
    // (the gates are scalars per value head: P and D scaled per record)
    const bool newk = KDA || hv == hv_lo || hv % a.G == 0;
    TS* const tile = static_cast<TS*>(a.st.p) + s * a.st.s0 + int64_t(hv) * a.st.s1;
    float f[2][32];  // rows g, g + 8 of the warp's tile: [h][4c + e] = column 16c + 4·t4 + e
    if (count > 0 || mat) {
      auto load_tile = [&](int tl) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const TS* rp = tile + int64_t(16 * tl + g + 8 * h) * a.st.s2 + 4 * t4;
#pragma unroll
          for (int c = 0; c < 8; ++c) ld4<SD>(reinterpret_cast<const char*>(rp + 16 * c), f[h] + 4 * c);
        }
      };
      if (warp < ntiles) load_tile(warp);  // in flight during the preparation
      if (count > 0) {
        // Records: every load of an item issued before its stores (β_j and
        // GDN's g_j by thread j first, then k, ks, KDA g and, for K = V, v in
        // one pass: one round trip).
        float bq = 0.f, gq = 0.f;
        if (tid < count) {
          const int64_t pos = ring_pos_near(start, tid, rg.R);
          bq = static_cast<const float*>(a.ring_beta.p)[s * a.ring_beta.s0 + pos * a.ring_beta.s1 +
                                                        int64_t(hv) * a.ring_beta.s2];
          if (!KDA) gq = rg.g[s * rg.g0 + pos * rg.g1 + int64_t(hv) * rg.g2];
        }
        if (a.k_vec && a.v_vec && (!KDA || a.g_vec)) {
          // Aligned rings: groups of 4 elements (x: elements 4x .. 4x + 3 of
          // the [count][K] and [count][V] records), two per thread at a time.
          constexpr int K4 = K / 4;
          const int V4 = V / 4, nk4 = newk ? count * K4 : 0, nv4 = count * V4, n4 = max(nk4, nv4);
          for (int x0 = tid; x0 < n4; x0 += 2 * nthr) {
            uint4 kb[2], vb[2];
            float ks[2];
            float4 gg[2];
#pragma unroll
            for (int u = 0; u < 2; ++u) {
              const int x = x0 + u * nthr;
              const int jk = x / K4, jv = V == K ? jk : div_small(x, V4);
              const int i = 4 * (x - jk * K4), v = 4 * (x - jv * V4);
              const bool hk = x < nk4, hvr = x < nv4;
              const int64_t pk = ring_pos_near(start, hk ? jk : 0, rg.R), pv = ring_pos_near(start, hvr ? jv : 0, rg.R);
              kb[u] = hk ? load4_bits(rg.k, rg.k_dt, s * rg.k0 + pk * rg.k1 + int64_t(kh) * rg.k2 + i) : uint4{};
              ks[u] = hk ? rg.ks[s * rg.ks0 + pk * rg.ks1 + int64_t(kh) * rg.ks2] : 0.f;
              gg[u] = KDA && hk ? *reinterpret_cast<const float4*>(rg.g + s * rg.g0 + pk * rg.g1 + int64_t(hv) * rg.g2 + i)
                                : float4{};
              vb[u] = hvr ? load4_bits(a.ring_v.p, a.ring_v.dt,
                                       s * a.ring_v.s0 + pv * a.ring_v.s1 + int64_t(hv) * a.ring_v.s2 + v)
                          : uint4{};
            }
#pragma unroll
            for (int u = 0; u < 2; ++u) {
              const int x = x0 + u * nthr;
              if (x < nk4) {
                const float4 k = widen4(kb[u], rg.k_dt);
                store4(KH + 4 * x, make_float4(k.x * ks[u], k.y * ks[u], k.z * ks[u], k.w * ks[u]));
                if (KDA) store4(GJ + 4 * x, gg[u]);
              }
              if (x < nv4) store4(VJ + 4 * x, widen4(vb[u], a.ring_v.dt));
            }
          }
        } else {
          // (4 items per thread at a time, raw: load_any widens a 16-bit key or
          // v in the branch that loads it, so each waited for the one before;
          // docs/perf_notes_delta.md, "the same for the T > 1 kernel's keys and
          // the dual fold's records")
          const int nkv = count * (newk ? max(K, V) : V);
          for (int x0 = tid; x0 < nkv; x0 += 4 * nthr) {
            uint32_t kb[4], vb[4];
            float ks[4], gg[4];
#pragma unroll
            for (int u = 0; u < 4; ++u) {
              const int x = x0 + u * nthr;
              const int jk = x / K, i = x - jk * K, jv = V == K ? jk : x / V, v = x - jv * V;
              const bool hk = newk && x < nkv && jk < count, hvr = x < nkv && jv < count;
              const int64_t pk = ring_pos_near(start, hk ? jk : 0, rg.R), pv = ring_pos_near(start, hvr ? jv : 0, rg.R);
              kb[u] = hk ? load_bits(rg.k, rg.k_dt, s * rg.k0 + pk * rg.k1 + int64_t(kh) * rg.k2 + i) : 0u;
              ks[u] = hk ? rg.ks[s * rg.ks0 + pk * rg.ks1 + int64_t(kh) * rg.ks2] : 0.f;
              gg[u] = KDA && hk ? rg.g[s * rg.g0 + pk * rg.g1 + int64_t(hv) * rg.g2 + i] : 0.f;
              vb[u] = hvr ? load_bits(a.ring_v.p, a.ring_v.dt, s * a.ring_v.s0 + pv * a.ring_v.s1 + int64_t(hv) * a.ring_v.s2 + v)
                          : 0u;
            }
#pragma unroll
            for (int u = 0; u < 4; ++u) {
              const int x = x0 + u * nthr;
              const int jk = x / K, jv = V == K ? jk : x / V;
              if (newk && x < nkv && jk < count) {
                KH[x] = widen_bits(kb[u], rg.k_dt) * ks[u];
                if (KDA) GJ[x] = gg[u];
              }
              if (x < nkv && jv < count) VJ[x] = widen_bits(vb[u], a.ring_v.dt);
            }
          }
        }
        if (tid < count) {
          BT[tid] = bq;
          if (!KDA) GJ[tid] = gq;
        }
        for (int j = tid + nthr; j < count; j += nthr) {
          const int64_t pos = ring_pos_near(start, j, rg.R);
          BT[j] = static_cast<const float*>(a.ring_beta.p)[s * a.ring_beta.s0 + pos * a.ring_beta.s1 +
                                                           int64_t(hv) * a.ring_beta.s2];
          if (!KDA) GJ[j] = rg.g[s * rg.g0 + pos * rg.g1 + int64_t(hv) * rg.g2];
        }
        __syncthreads();
        dual_fold_phase(a, hv - hv_lo, 0);
        // W and E (prefix sums, threads x < K) and F (suffix sums, x ≥ K), split,
        // in their fragment layouts, records past the chunk's end zero; a
        // thread per (channel, direction). GDN: W = F = k̂ (a new key head
        // only), E and the record scales EW, EF per value head.
        auto put_w = [&](int c, int jj, int k, float w) {  // W(record c0 + jj, channel k), split
          uint32_t hi, lo;
          tf32_split<true>(w, hi, lo);
          uint32_t* u = WB + ((int64_t(c) * FOLD_CH + jj) * FOLD_WBP + k / 2) * 4;
          u[k & 1] = hi;
          u[2 + (k & 1)] = lo;
        };
        auto put_f = [&](int c, int jj, int k, float fv) {  // F(record c0 + jj, channel k), split
          uint32_t hi, lo;
          tf32_split<true>(fv, hi, lo);
          const int r = jj & 7;
          uint32_t* u = FB + ((int64_t(c) * K + k) * FOLD_FBS + (jj >> 3) * 4 + (r & 3)) * 4;
          u[r >> 2] = hi;
          u[2 + (r >> 2)] = lo;
        };
        for (int x = tid; x < 2 * K; x += nthr) {
          const int k = x < K ? x : x - K;
          for (int c = 0; c < nch; ++c) {
            const int c0 = c * FOLD_CH, n = min(FOLD_CH, count - c0);
            if constexpr (!KDA) {
              if (x < K) {
                float lam = 0.f;
                for (int jj = 0; jj < n; ++jj) lam += GJ[c0 + jj];
                E[c * K + k] = expf(lam);
              }
              if (!newk) continue;
              for (int jj = 0; jj < FOLD_CH; ++jj) {
                const float kk = jj < n ? KH[(c0 + jj) * K + k] : 0.f;
                if (x < K) put_w(c, jj, k, kk);
                else put_f(c, jj, k, kk);
              }
            } else if (x < K) {
              float lam = 0.f;
              for (int jj = 0; jj < FOLD_CH; ++jj) {
                float w = 0.f;
                if (jj < n) {
                  lam += GJ[(c0 + jj) * K + k];
                  w = expf(lam) * KH[(c0 + jj) * K + k];
                }
                put_w(c, jj, k, w);
              }
              E[c * K + k] = expf(lam);
            } else {
              float suf = 0.f;
              for (int jj = FOLD_CH - 1; jj >= 0; --jj) {
                float fv = 0.f;
                if (jj < n) {
                  fv = expf(suf) * KH[(c0 + jj) * K + k];
                  suf += GJ[(c0 + jj) * K + k];
                }
                put_f(c, jj, k, fv);
              }
            }
          }
        }
        if constexpr (!KDA)
          for (int t = tid; t < nch * FOLD_CH; t += nthr) {
            const int c0 = t / FOLD_CH * FOLD_CH, n = min(FOLD_CH, count - c0), jj = t - c0;
            float lam = 0.f, suf = 0.f;
            for (int q = 0; q < n; ++q) {
              if (q <= jj) lam += GJ[c0 + q];
              else suf += GJ[c0 + q];
            }
            EW[t] = jj < n ? expf(lam) : 0.f;
            EF[t] = jj < n ? expf(suf) : 0.f;
          }
        if constexpr (KDA) {
          // M: a warp per (chunk, i), lanes over the channels, j running up;
          // warp w takes i = w and i = n − 1 − w (n − 1 pairs per warp at n = 16).
          for (int c = 0; c < nch; ++c) {
            const int c0 = c * FOLD_CH, n = min(FOLD_CH, count - c0);
            for (int q = 2 * warp; q < n; q += (q & 1) ? 2 * nwarps - 1 : 1) {  // q = 2·w2 + side
              const int i = (q & 1) == 0 ? q / 2 : n - 1 - q / 2;
              float lam[K / 32] = {0.f, 0.f, 0.f, 0.f};
              for (int j = i + 1; j < n; ++j) {
                float part = 0.f;
#pragma unroll
                for (int r = 0; r < K / 32; ++r) {
                  const int ch = lane32 + 32 * r;
                  float kk = KH[(c0 + i) * K + ch] * KH[(c0 + j) * K + ch];
                  lam[r] += GJ[(c0 + j) * K + ch];
                  kk *= expf(lam[r]);
                  part += kk;
                }
                part = warp_sum(part);
                if (lane32 == 0) M[(c0 + j) * FOLD_CH + i] = part;
              }
            }
          }
        } else {
          // GDN: M_{j,i} = e^{Λ_j − Λ_i} (k̂_i·k̂_j), the 120 pairs i < j of a
          // chunk two threads each (half the channels each, float4 steps from
          // a per-pair offset: minimal shared-memory wavefronts), one shuffle;
          // the Gram kept (GR) for the key head's next value heads.
          static_assert(DUAL_THREADS >= FOLD_CH * (FOLD_CH - 1), "two threads per pair");
          const int p = tid >> 1, half = tid & 1;
          int j = 1;
          while (j * (j + 1) / 2 <= p) ++j;  // p = j (j − 1) / 2 + i
          const int i = p - j * (j - 1) / 2;
          const bool pv = p < FOLD_CH * (FOLD_CH - 1) / 2;
          for (int c = 0; c < nch; ++c) {
            const int c0 = c * FOLD_CH, n = min(FOLD_CH, count - c0);
            const bool live = pv && j < n;
            float part = 0.f;
            if (!newk) {
              if (live && half == 0) part = GR[(c0 + j) * FOLD_CH + i];
            } else if (live) {
              const float* ki = KH + (c0 + i) * K + (K / 2) * half;
              const float* kj = KH + (c0 + j) * K + (K / 2) * half;
              const int rot = 4 * (p & 7);
#pragma unroll 4
              for (int m = 0; m < K / 8; ++m) {
                const int k = (4 * m + rot) & (K / 2 - 1);
                const float4 a4 = *reinterpret_cast<const float4*>(ki + k);
                const float4 b4 = *reinterpret_cast<const float4*>(kj + k);
                part = fmaf(a4.x, b4.x, part);
                part = fmaf(a4.y, b4.y, part);
                part = fmaf(a4.z, b4.z, part);
                part = fmaf(a4.w, b4.w, part);
              }
            }
            if (newk) {
              part += __shfl_xor_sync(0xffffffffu, part, 1);
              if (live && half == 0) GR[(c0 + j) * FOLD_CH + i] = part;
            }
            if (live && half == 0) {
              float glam = 0.f;
              for (int q = i + 1; q <= j; ++q) glam += GJ[c0 + q];
              M[(c0 + j) * FOLD_CH + i] = part * expf(glam);
            }
          }
        }
        __syncthreads();
        dual_fold_phase(a, hv - hv_lo, 1);
      }
      for (int tl = warp; tl < ntiles; tl += nwarps) {
        if (tl != warp) load_tile(tl);
        const int r0 = 16 * tl;
        for (int c = 0; c < nch; ++c) {
          const int c0 = c * FOLD_CH, n = min(FOLD_CH, count - c0);
          // P = S·Wᵀ: acc[nt][2h + i] = P(row g + 8h, record c0 + 8·nt + 2·t4 + i),
          // the hi·hi products and the two correction terms in accumulators
          // of their own (four dependent chains of 16 / 32 HMMA instead of two
          // of 48), added at the end
          float acc[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
          {
            float cor[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
            const uint4* wb = reinterpret_cast<const uint4*>(WB) + int64_t(c) * FOLD_CH * FOLD_WBP;
#pragma unroll
            for (int cc = 0; cc < 8; ++cc)
#pragma unroll
              for (int s2 = 0; s2 < 2; ++s2) {
                uint32_t ah[4], al[4];
                cuda_util::a_frag_rows<true>(f[0], f[1], 4 * cc + 2 * s2, ah, al);
#pragma unroll
                for (int nt = 0; nt < 2; ++nt) {
                  const uint4 q = wb[(8 * nt + g) * FOLD_WBP + 8 * cc + 2 * t4 + s2];
                  cuda_util::mma_tf32x3_apart(acc[nt], cor[nt], ah, al, q.x, q.y, q.z, q.w);
                }
              }
#pragma unroll
            for (int nt = 0; nt < 2; ++nt)
#pragma unroll
              for (int i = 0; i < 4; ++i) acc[nt][i] += cor[nt][i];
            if constexpr (!KDA)  // W = k̂: P_j = e^{Λ_j} (S·k̂_j)
#pragma unroll
              for (int nt = 0; nt < 2; ++nt)
#pragma unroll
                for (int i = 0; i < 2; ++i) {
                  const float ew = EW[c0 + 8 * nt + 2 * t4 + i];
                  acc[nt][i] *= ew;
                  acc[nt][2 + i] *= ew;
                }
          }
          // The solve across the quad; da: the fold's A fragments (rows g,
          // g + 8 × records 8·ks + t4, 8·ks + t4 + 4).
          float da[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
          for (int jj = 0; jj < FOLD_CH; ++jj) {
            if (jj >= n) break;
            const int nt = jj >> 3, own = (jj & 7) >> 1, io = jj & 1;
            const float be = BT[c0 + jj];
            float d[2];
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const float vj = VJ[(c0 + jj) * V + r0 + g + 8 * h];
              d[h] = __shfl_sync(0xffffffffu, round_to(rg.d_dt, be * (vj - acc[nt][2 * h + io])), qb + own);
            }
#pragma unroll
            for (int nt2 = 0; nt2 < 2; ++nt2)
#pragma unroll
              for (int i = 0; i < 2; ++i) {
                const int rec = 8 * nt2 + 2 * t4 + i;
                if (rec > jj && rec < n) {
                  const float mji = M[(c0 + rec) * FOLD_CH + jj];
                  acc[nt2][i] = fmaf(mji, d[0], acc[nt2][i]);
                  acc[nt2][2 + i] = fmaf(mji, d[1], acc[nt2][2 + i]);
                }
              }
            const int ks = jj >> 3;
            if ((jj & 7) == t4) da[ks][0] = d[0], da[ks][1] = d[1];
            if ((jj & 7) == t4 + 4) da[ks][2] = d[0], da[ks][3] = d[1];
          }
          if (tl == warp && c == 0) dual_fold_phase(a, hv - hv_lo, 2);
          // S ← E ⊙ S + D·F
          const float* ec = E + c * K + 4 * t4;
#pragma unroll
          for (int cc = 0; cc < 8; ++cc) {
            const float4 e4 = *reinterpret_cast<const float4*>(ec + 16 * cc);
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              f[h][4 * cc] *= e4.x;
              f[h][4 * cc + 1] *= e4.y;
              f[h][4 * cc + 2] *= e4.z;
              f[h][4 * cc + 3] *= e4.w;
            }
          }
          if constexpr (!KDA)  // F = k̂: D's columns scaled by e^{Λ_{c1−1} − Λ_j}
#pragma unroll
            for (int ks = 0; ks < 2; ++ks) {
              const float e0 = EF[c0 + 8 * ks + t4], e1 = EF[c0 + 8 * ks + t4 + 4];
              da[ks][0] *= e0, da[ks][1] *= e0, da[ks][2] *= e1, da[ks][3] *= e1;
            }
          uint32_t dh[2][4], dl[2][4];
#pragma unroll
          for (int ks = 0; ks < 2; ++ks)
#pragma unroll
            for (int i = 0; i < 4; ++i) tf32_split<true>(da[ks][i], dh[ks][i], dl[ks][i]);
          const uint4* fb = reinterpret_cast<const uint4*>(FB) + int64_t(c) * K * FOLD_FBS;
          const int nks = n > 8 ? 2 : 1;
#pragma unroll
          for (int cc = 0; cc < 8; ++cc)
#pragma unroll
            for (int nt = 0; nt < 2; ++nt) {
              const int col = 16 * cc + 4 * (g >> 1) + 2 * nt + (g & 1);
              float acc2[4] = {f[0][4 * cc + 2 * nt], f[0][4 * cc + 2 * nt + 1], f[1][4 * cc + 2 * nt],
                               f[1][4 * cc + 2 * nt + 1]};
#pragma unroll
              for (int ks = 0; ks < 2; ++ks) {
                if (ks >= nks) break;
                const uint4 q = fb[col * FOLD_FBS + ks * 4 + t4];
                mma_tf32x3(acc2, dh[ks], dl[ks], q.x, q.y, q.z, q.w);
              }
              f[0][4 * cc + 2 * nt] = acc2[0], f[0][4 * cc + 2 * nt + 1] = acc2[1];
              f[1][4 * cc + 2 * nt] = acc2[2], f[1][4 * cc + 2 * nt + 1] = acc2[3];
            }
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = r0 + g + 8 * h;
          if (mat) {
#pragma unroll
            for (int cc = 0; cc < 8; ++cc)
#pragma unroll
              for (int e = 0; e < 4; ++e)
                dual_store_out(a.out, a.out_dt, int64_t(b) * a.o0 + int64_t(hv) * a.o1 + int64_t(r) * a.o2 + 16 * cc + 4 * t4 + e,
                               f[h][4 * cc + e]);
          } else {
            TS* const rp = tile + int64_t(r) * a.st.s2 + 4 * t4;
#pragma unroll
            for (int cc = 0; cc < 8; ++cc) st4<SD>(rp + 16 * cc, f[h] + 4 * cc);
            if constexpr (SD != DType::f32)  // the values as stored, for the pack
#pragma unroll
              for (int i = 0; i < 32; ++i) f[h][i] = Traits<SD>::load(Traits<SD>::store(f[h][i]));
          }
        }
      }
    }
    dual_fold_phase(a, hv - hv_lo, 3);
    uint8_t* const ctile = a.copy.p + s * a.copy.s0 + int64_t(hv) * a.copy.s1;
    if (reg_pack) {
      const bool has = warp < ntiles;
      float t = 0.f;
      if (a.geom.format == ReadFormat::nvfp4) {
        float amax = 0.f;
        if (has)
#pragma unroll
          for (int i = 0; i < 64; ++i) amax = fmaxf(amax, quant::dev::finite_abs(f[i / 32][i % 32]));
        t = quant::dev::nvfp4_tensor_scale(quant::dev::block_max(amax));
        if (tid == 0) *reinterpret_cast<float*>(ctile + a.geom.tensor_scale_offset) = t;
      }
      quant::dev::zero_tile_gaps(ctile, a.geom);
      if (has)
#pragma unroll
        for (int h = 0; h < 2; ++h) quant::dev::pack_row_quad_any(f[h], 16 * warp + g + 8 * h, t4, ctile, a.geom, t);
    }
    dual_fold_phase(a, hv - hv_lo, 4);
    __syncthreads();  // the head's checkpoint rows are visible to the block; records free
    if (pack && !reg_pack) quant::dev::pack_tile_block_any<SD>(tile, a.st.s2, ctile, a.geom);
    if (hv - hv_lo < 8) dual_fold_stamp(a, 2 + hv - hv_lo);
  }
  dual_fold_stamp(a, 14);
}

}  // namespace replayssm::delta::cuda_impl
