#pragma once

// Whether this build has the CUDA kernels, and how many GPUs the CUDA runtime sees.

namespace memscript::kernels {

bool cuda_kernels_compiled();
// GPUs the CUDA runtime sees (0 without CUDA kernels or without a GPU).
int cuda_device_count();

}  // namespace memscript::kernels
