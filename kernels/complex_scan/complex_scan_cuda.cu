#include "kernels/common/cuda_launch.cuh"
#include "kernels/complex_scan/complex_scan.h"

namespace memscript::kernels {

namespace {

__global__ void complex_scan_forward_kernel(ComplexScanForward<float> f, ComplexScanShape shape) {
  complex_scan_thread<float, float>(f, shape, blockIdx.x, threadIdx.x, blockDim.x);
}

__global__ void complex_scan_backward_kernel(ComplexScanBackward<float> g, ComplexScanShape shape) {
  complex_scan_backward_thread<float, float>(g, shape, blockIdx.x, threadIdx.x, blockDim.x);
}

}  // namespace

bool complex_scan_forward_cuda(const ComplexScanForward<float>& f, ComplexScanShape shape,
                               void* stream, const char** message) {
  const int64_t blocks = complex_scan_blocks(shape);
  if (blocks == 0) return true;
  complex_scan_forward_kernel<<<static_cast<unsigned>(blocks), kComplexScanThreadsPerBlock, 0,
                                cuda_stream(stream)>>>(f, shape);
  return cuda_launch_succeeded(message);
}

bool complex_scan_backward_cuda(const ComplexScanBackward<float>& g, ComplexScanShape shape,
                                void* stream, const char** message) {
  const int64_t blocks = complex_scan_blocks(shape);
  if (blocks == 0) return true;
  complex_scan_backward_kernel<<<static_cast<unsigned>(blocks), kComplexScanThreadsPerBlock, 0,
                                 cuda_stream(stream)>>>(g, shape);
  return cuda_launch_succeeded(message);
}

}  // namespace memscript::kernels
