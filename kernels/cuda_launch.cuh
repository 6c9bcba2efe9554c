#pragma once

// What every CUDA launcher in kernels/ shares: turning the launch's error state into the
// launchers' bool + message, the stream, and bf16 pointers.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/diag_scan.h"

namespace memscript::kernels {

inline bool cuda_launch_succeeded(const char** message) {
  const cudaError_t status = cudaGetLastError();
  if (status == cudaSuccess) return true;
  if (message) *message = cudaGetErrorString(status);
  return false;
}

inline cudaStream_t cuda_stream(void* stream) { return static_cast<cudaStream_t>(stream); }

// The raw bf16 bits the host API passes, as the CUDA type the kernels compute with.
inline const __nv_bfloat16* as_bf16(const Bf16Bits* p) {
  return reinterpret_cast<const __nv_bfloat16*>(p);
}
inline __nv_bfloat16* as_bf16(Bf16Bits* p) { return reinterpret_cast<__nv_bfloat16*>(p); }

}  // namespace memscript::kernels
