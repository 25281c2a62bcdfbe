// GPU benchmark entry point: `replayssm bench --backend cuda ...` calls it
// with argv[0] = "bench" and the remaining arguments of the command (the
// `--backend cuda` pair included). Returns the process exit code. The real
// implementation (bench_gpu.cpp) is compiled only with REPLAYSSM_WITH_CUDA;
// bench_gpu_stub.cpp stands in otherwise.
#pragma once

int bench_gpu_main(int argc, char** argv);
