#include "runtime/device.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <torch/cuda.h>

#include "runtime/options.h"

namespace memscript {

std::string resolve_device(const std::string& requested) {
  const bool gpu = torch::cuda::is_available();
  if (requested == "auto") return gpu ? "cuda" : "cpu";
  if (requested == "cpu") return "cpu";
  if (requested == "cuda") {
    if (!gpu) throw UserError("--device cuda: no CUDA GPU is available on this machine");
    return "cuda";
  }
  throw UserError("--device must be auto, cpu or cuda, not '" + requested + "'");
}

void use_full_float32() {
  at::globalContext().setAllowTF32CuDNN(false);
  at::globalContext().setAllowTF32CuBLAS(false);
}

void set_threads(int threads) { at::set_num_threads(threads); }

bool flush_denormals(bool flush) { return at::globalContext().setFlushDenormal(flush) || !flush; }

void start_threads() {
  at::parallel_for(0, 1 << 16, 1, [](int64_t, int64_t) {});
}

}  // namespace memscript
