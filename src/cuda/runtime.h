// Host-only declarations of the shared CUDA runtime helpers (src/cuda/runtime.cu).
// Includable from plain C++ translation units (tests, host launchers); device
// vocabulary lives in common.cuh, which includes this header.
#pragma once

namespace replayssm::cuda_util {

// Throws replayssm::Error(fn, "device", ...) when this binary holds no kernel
// image for the current device (a GPU outside REPLAYSSM_CUDA_ARCHS), naming
// the build's architectures, the GPU's sm_XY and the CMake option to rebuild
// with. The answer is cached per device; call it at the top of every CUDA
// launcher, before any argument is written.
void require_supported_device(const char* fn);

// An integer from the environment variable `name` (launch-choice overrides
// for tests and measurements), else dflt.
int env_int(const char* name, int dflt);

}  // namespace replayssm::cuda_util
