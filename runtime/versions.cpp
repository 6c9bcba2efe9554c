#include "runtime/versions.h"

#include <torch/cuda.h>
#include <torch/version.h>
#include <fstream>

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

namespace {

// The text after "key:" on a /proc/cpuinfo line, or "" when the line is not that key's.
std::string cpuinfo_value(const std::string& line, const std::string& key) {
  if (line.compare(0, key.size(), key) != 0) return "";
  const size_t colon = line.find(':');
  if (colon == std::string::npos || line.find_first_not_of(" \t", key.size()) != colon) return "";
  const size_t start = line.find_first_not_of(' ', colon + 1);
  return start == std::string::npos ? "" : line.substr(start);
}

}  // namespace

std::string processor() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string model, flags;
  for (std::string line; std::getline(cpuinfo, line) && (model.empty() || flags.empty());) {
    if (model.empty()) model = cpuinfo_value(line, "model name");
    if (flags.empty()) flags = cpuinfo_value(line, "flags");
    if (flags.empty()) flags = cpuinfo_value(line, "Features");  // Arm
  }
  if (model.empty()) model = "unknown processor";
  flags = " " + flags + " ";
  for (const char* widest : {"avx512f", "avx2", "avx", "sve", "asimd"}) {
    if (flags.find(std::string(" ") + widest + " ") != std::string::npos)
      return model + " (" + widest + ")";
  }
  return model;
}

bool cuda_kernels_built() { return kernels::cuda_kernels_compiled(); }

bool gpu_available() { return torch::cuda::is_available(); }

nlohmann::json runtime_versions() {
  return {{"memscript", memscript_version()},     {"libtorch", libtorch_version()},
          {"compiler", compiler_version()},       {"processor", processor()},
          {"cuda_kernels", cuda_kernels_built()}, {"gpu", gpu_available()}};
}

}  // namespace memscript
