// CUDA backend of quant_pack_stochastic: one block per tile, the block-wide
// encoder of tile_codec.cuh reading the fp32 input from global memory.
#include "cuda/common.cuh"
#include "quant/stochastic.h"
#include "quant/tile_codec.cuh"

namespace replayssm::quant::cuda {
namespace {

constexpr int THREADS = 256;

struct SrPackParams {
  const float* in;          // [n, R, K], unit inner stride
  int64_t in_s0, in_s1;     // element strides of tiles and rows
  uint8_t* packed;          // [n, tile_bytes]
  int64_t packed_s0;        // bytes between tiles
  const int64_t* ids;       // [n] tile ids (null: i)
  int64_t ids_s;
  dev::TileFmt f;
  uint64_t seed, step;
};

__global__ void __launch_bounds__(THREADS) quant_pack_stochastic_kernel(const SrPackParams p) {
  const int64_t i = blockIdx.x;
  const float* x = p.in + i * p.in_s0;
  const uint64_t id = p.ids ? uint64_t(p.ids[i * p.ids_s]) : uint64_t(i);
  dev::encode_tile(p.f, [&](int64_t r, int64_t k) { return x[r * p.in_s1 + k]; },
                   p.packed + i * p.packed_s0, true, dev::sr_stream(p.seed, id, p.step));
}

}  // namespace

void pack_stochastic(const QuantLayout& L, const Tensor& in, const Tensor& packed,
                     const Tensor& tile_ids, const QuantRounding& rounding, const Exec& exec) {
  constexpr const char* FN = "quant_pack_stochastic";
  cuda_util::require_supported_device(FN);
  const int64_t n = in.shape[0];
  if (n == 0) return;
  SrPackParams p{static_cast<const float*>(in.data), in.stride[0], in.stride[1],
                 static_cast<uint8_t*>(packed.data), packed.stride[0],
                 tile_ids.defined() ? static_cast<const int64_t*>(tile_ids.data) : nullptr,
                 tile_ids.defined() ? tile_ids.stride[0] : 0, dev::tile_fmt(L), rounding.seed,
                 rounding.step};
  quant_pack_stochastic_kernel<<<unsigned(n), THREADS, 0, cuda_util::stream_of(exec)>>>(p);
  cuda_util::check_launch(FN);
}

}  // namespace replayssm::quant::cuda
