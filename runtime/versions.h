#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace memscript {

std::string memscript_version();
std::string libtorch_version();
std::string compiler_version();
// The processor's model name and the widest vector instructions it has ("avx512f", "avx2", ...),
// from /proc/cpuinfo. MKL, which libtorch's larger CPU matrix products use, picks its code by
// them, so a run's bits can differ between processors where they agree on one.
std::string processor();
bool cuda_kernels_built();
bool gpu_available();

// Everything above, for the run folder.
nlohmann::json runtime_versions();

}  // namespace memscript
