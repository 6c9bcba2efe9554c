#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace memscript {

std::string memscript_version();
std::string libtorch_version();
std::string compiler_version();
bool cuda_kernels_built();
bool gpu_available();

// Everything above, for the run folder.
nlohmann::json runtime_versions();

}  // namespace memscript
