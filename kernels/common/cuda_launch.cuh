#pragma once

// What every CUDA launcher in kernels/ shares: the stream, one launch with one policy for
// dynamic shared memory, and turning the launch's error state into the launchers' bool +
// message.

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

// Launches kernel(p) on `blocks` blocks of `threads` with `shared` bytes of dynamic shared
// memory. Up to 48 KiB every block gets it; beyond that a kernel must opt in, up to what the
// device allows (227 KiB on an H100). One policy for every kernel: a state that does not fit is
// a false return naming `what`, and the op reports it instead of launching.
template <typename... Params, typename... Args>
bool launch_kernel(void (*kernel)(Params...), int64_t blocks, int64_t threads, int64_t shared,
                   void* stream, const char** message, const char* too_large, const Args&... args) {
  if (blocks == 0) return true;
  if (shared > 48 * 1024) {
    int device = 0, limit = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
    if (shared > limit || cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(shared)) != cudaSuccess) {
      if (message) *message = too_large;
      return false;
    }
  }
  kernel<<<static_cast<unsigned>(blocks), static_cast<unsigned>(threads),
           static_cast<size_t>(shared), cuda_stream(stream)>>>(args...);
  return cuda_launch_succeeded(message);
}

// The matrix-state kernels' block: one thread per row and per column of a head's [dv, dk]
// state (whichever is wider), whole warps, at most 1024.
inline int64_t head_threads(int64_t key_dim, int64_t value_dim) {
  const int64_t widest = value_dim > key_dim ? value_dim : key_dim;
  const int64_t threads = (widest + 31) / 32 * 32;
  return threads < 1024 ? threads : 1024;
}

}  // namespace memscript::kernels
