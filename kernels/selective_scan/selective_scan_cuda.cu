#include "kernels/common/cuda_launch.cuh"
#include "kernels/selective_scan/selective_scan.h"

namespace memscript::kernels {

namespace {

__global__ void selective_scan_forward_kernel(SelectiveScanForward<float, float> f,
                                              SelectiveScanShape s) {
  selective_scan_thread<float, float>(f, s, blockIdx.x, threadIdx.x, blockDim.x);
}

__global__ void selective_scan_backward_kernel(SelectiveScanBackward<float, float> g,
                                               SelectiveScanShape s) {
  selective_scan_backward_thread<float, float>(g, s, blockIdx.x, threadIdx.x, blockDim.x);
}

}  // namespace

bool selective_scan_forward_cuda(const SelectiveScanForward<float, float>& f, SelectiveScanShape s,
                                 void* stream, const char** message) {
  const int64_t blocks = selective_scan_blocks(s.batch * s.channels);
  if (blocks == 0) return true;
  selective_scan_forward_kernel<<<static_cast<unsigned>(blocks), kSelectiveScanThreadsPerBlock, 0,
                                  cuda_stream(stream)>>>(f, s);
  return cuda_launch_succeeded(message);
}

bool selective_scan_backward_cuda(const SelectiveScanBackward<float, float>& g,
                                  SelectiveScanShape s, void* stream, const char** message) {
  const int64_t blocks = selective_scan_blocks(s.batch * s.groups());
  if (blocks == 0) return true;
  selective_scan_backward_kernel<<<static_cast<unsigned>(blocks), kSelectiveScanThreadsPerBlock, 0,
                                   cuda_stream(stream)>>>(g, s);
  return cuda_launch_succeeded(message);
}

}  // namespace memscript::kernels
