// Linked instead of the .cu files when memscript is built without CUDA.
#include "diag_scan.h"

namespace memscript::kernels {

bool diag_scan_forward_cuda(const float*, const float*, const float*, float*, float*, DiagScanShape,
                            void*, const char** message) {
  if (message)
    *message = "memscript was built without CUDA kernels (MEMSCRIPT_CUDA=OFF or no nvcc)";
  return false;
}

bool cuda_kernels_compiled() { return false; }

int cuda_device_count() { return 0; }

}  // namespace memscript::kernels
