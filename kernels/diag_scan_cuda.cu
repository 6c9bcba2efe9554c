#include <cuda_runtime.h>

#include "diag_scan.h"

namespace memscript::kernels {

namespace {
__global__ void diag_scan_forward_kernel(const float* a, const float* b, const float* h0, float* h,
                                         float* h_last, DiagScanShape shape) {
  diag_scan_thread<float, float>(a, b, h0, h, h_last, shape, blockIdx.x, threadIdx.x, blockDim.x);
}
}  // namespace

bool diag_scan_forward_cuda(const float* a, const float* b, const float* h0, float* h,
                            float* h_last, DiagScanShape shape, void* stream,
                            const char** message) {
  const int64_t blocks = diag_scan_blocks(shape);
  if (blocks == 0) return true;
  diag_scan_forward_kernel<<<static_cast<unsigned>(blocks), kDiagScanThreadsPerBlock, 0,
                             static_cast<cudaStream_t>(stream)>>>(a, b, h0, h, h_last, shape);
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) {
    if (message) *message = cudaGetErrorString(status);
    return false;
  }
  return true;
}

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
