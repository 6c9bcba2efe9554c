// The main of the `gpu` tests: without a usable GPU it says so loudly and exits 77, which CTest
// reports as skipped (never as passed).

#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>

#include "runtime/device.h"
#include "runtime/torch.h"

int main(int argc, char** argv) {
  if (!torch::cuda::is_available()) {
    std::fprintf(stderr,
                 "SKIPPED: no usable GPU here (torch::cuda::is_available() is false); the gpu "
                 "tests compare the CUDA kernels with the CPU and need one\n");
    return 77;
  }
  memscript::use_full_float32();  // as the memscript binary runs
  return Catch::Session().run(argc, argv);
}
