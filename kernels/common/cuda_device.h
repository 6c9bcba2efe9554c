#pragma once

// Whether this build has the CUDA kernels, how many GPUs the CUDA runtime sees, and how an op
// declares its CUDA launchers so that a build without CUDA needs no stub for them.

namespace memscript::kernels {

#ifdef MEMSCRIPT_WITH_CUDA
bool cuda_kernels_compiled();
// GPUs the CUDA runtime sees (0 without a GPU).
int cuda_device_count();
#else
inline bool cuda_kernels_compiled() { return false; }
inline int cuda_device_count() { return 0; }

// What every launcher returns in a build without CUDA: false, and why.
inline bool no_cuda(const char** message) {
  if (message)
    *message = "memscript was built without CUDA kernels (MEMSCRIPT_CUDA=OFF or no nvcc)";
  return false;
}
#endif

}  // namespace memscript::kernels

// Declares an op's CUDA launcher, bool name(<parameters>, void* stream, const char** message):
// device pointers, launched on `stream` (a cudaStream_t); false when the launch failed, with
// `message` saying why. With CUDA the op's <op>_cuda.cu defines it; without, this line defines
// it to fail with no_cuda's message.
#ifdef MEMSCRIPT_WITH_CUDA
#define MEMSCRIPT_CUDA_LAUNCHER(name, ...) \
  bool name(__VA_ARGS__, void* stream, const char** message)
#else
#define MEMSCRIPT_CUDA_LAUNCHER(name, ...)                     \
  inline bool name(__VA_ARGS__, void*, const char** message) { \
    return ::memscript::kernels::no_cuda(message);             \
  }                                                            \
  static_assert(true)
#endif
