#include "runtime/versions.h"

#include <torch/cuda.h>
#include <torch/version.h>

#include "kernels/common/cuda_device.h"
#include "memscript_config.h"

namespace memscript {

std::string memscript_version() { return MEMSCRIPT_VERSION; }

std::string libtorch_version() { return TORCH_VERSION; }

std::string compiler_version() {
#if defined(__clang__)
  return "clang " __clang_version__;
#elif defined(__GNUC__)
  return "gcc " __VERSION__;
#else
  return "unknown";
#endif
}

bool cuda_kernels_built() { return kernels::cuda_kernels_compiled(); }

bool gpu_available() { return torch::cuda::is_available(); }

nlohmann::json runtime_versions() {
  return {{"memscript", memscript_version()},
          {"libtorch", libtorch_version()},
          {"compiler", compiler_version()},
          {"cuda_kernels", cuda_kernels_built()},
          {"gpu", gpu_available()}};
}

}  // namespace memscript
