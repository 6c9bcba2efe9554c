#pragma once

// What every CUDA launcher in kernels/ shares: turning the launch's error state into the
// launchers' bool + message, and the stream.

#include <cuda_runtime.h>

#include <cstdint>

namespace memscript::kernels {

inline bool cuda_launch_succeeded(const char** message) {
  const cudaError_t status = cudaGetLastError();
  if (status == cudaSuccess) return true;
  if (message) *message = cudaGetErrorString(status);
  return false;
}

inline cudaStream_t cuda_stream(void* stream) { return static_cast<cudaStream_t>(stream); }

}  // namespace memscript::kernels
