// Stand-in for the GPU bench in builds without the CUDA backend.
#if !defined(REPLAYSSM_WITH_CUDA)
#include <cstdio>

#include "bench_gpu.h"

int bench_gpu_main(int, char**) {
  std::fprintf(stderr, "replayssm bench: no CUDA backend in this build (configure with nvcc present)\n");
  return 2;
}
#endif
