#include <cuda_runtime.h>

#include "kernels/common/cuda_device.h"

namespace memscript::kernels {

bool cuda_kernels_compiled() { return true; }

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return count;
}

}  // namespace memscript::kernels
