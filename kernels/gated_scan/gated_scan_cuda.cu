#include "kernels/common/cuda_launch.cuh"
#include "kernels/gated_scan/gated_scan.h"

namespace memscript::kernels {

namespace {

template <typename T>
__global__ void gated_scan_forward_kernel(GatedCellKind kind, GatedScanForward<T> args,
                                          GatedScanShape shape) {
  gated_scan_thread<T, float>(kind, args, shape, blockIdx.x, threadIdx.x, blockDim.x);
}

template <typename T>
__global__ void gated_scan_backward_kernel(GatedCellKind kind, GatedScanBackward<T> args,
                                           GatedScanShape shape) {
  gated_scan_backward_thread<T, float>(kind, args, shape, blockIdx.x, threadIdx.x, blockDim.x);
}

template <typename T>
bool launch_forward(GatedCellKind kind, const GatedScanForward<T>& args, GatedScanShape shape,
                    void* stream, const char** message) {
  const int64_t blocks = gated_scan_blocks(shape);
  if (blocks == 0) return true;
  gated_scan_forward_kernel<T>
      <<<static_cast<unsigned>(blocks), kGatedScanThreadsPerBlock, 0, cuda_stream(stream)>>>(
          kind, args, shape);
  return cuda_launch_succeeded(message);
}

template <typename T>
bool launch_backward(GatedCellKind kind, const GatedScanBackward<T>& args, GatedScanShape shape,
                     void* stream, const char** message) {
  const int64_t blocks = gated_scan_blocks(shape);
  if (blocks == 0) return true;
  gated_scan_backward_kernel<T>
      <<<static_cast<unsigned>(blocks), kGatedScanThreadsPerBlock, 0, cuda_stream(stream)>>>(
          kind, args, shape);
  return cuda_launch_succeeded(message);
}

}  // namespace

bool gated_scan_forward_cuda(GatedCellKind kind, const GatedScanForward<float>& args,
                             GatedScanShape shape, void* stream, const char** message) {
  return launch_forward(kind, args, shape, stream, message);
}
bool gated_scan_forward_cuda(GatedCellKind kind, const GatedScanForward<Bf16>& args,
                             GatedScanShape shape, void* stream, const char** message) {
  return launch_forward(kind, args, shape, stream, message);
}
bool gated_scan_backward_cuda(GatedCellKind kind, const GatedScanBackward<float>& args,
                              GatedScanShape shape, void* stream, const char** message) {
  return launch_backward(kind, args, shape, stream, message);
}
bool gated_scan_backward_cuda(GatedCellKind kind, const GatedScanBackward<Bf16>& args,
                              GatedScanShape shape, void* stream, const char** message) {
  return launch_backward(kind, args, shape, stream, message);
}

}  // namespace memscript::kernels
