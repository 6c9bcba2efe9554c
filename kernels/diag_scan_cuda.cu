#include "kernels/cuda_launch.cuh"
#include "kernels/diag_scan.h"

namespace memscript::kernels {

namespace {

template <typename T>
__global__ void diag_scan_forward_kernel(const T* a, const T* b, const T* h0, T* h, T* h_last,
                                         DiagScanShape shape) {
  diag_scan_thread<T, float>(a, b, h0, h, h_last, shape, blockIdx.x, threadIdx.x, blockDim.x);
}

template <typename T>
__global__ void diag_scan_backward_kernel(DiagScanGrads<T> grads, DiagScanShape shape) {
  diag_scan_backward_thread<T, float>(grads, shape, blockIdx.x, threadIdx.x, blockDim.x);
}

template <typename T>
bool launch_forward(const T* a, const T* b, const T* h0, T* h, T* h_last, DiagScanShape shape,
                    void* stream, const char** message) {
  const int64_t blocks = diag_scan_blocks(shape);
  if (blocks == 0) return true;
  diag_scan_forward_kernel<T>
      <<<static_cast<unsigned>(blocks), kDiagScanThreadsPerBlock, 0, cuda_stream(stream)>>>(
          a, b, h0, h, h_last, shape);
  return cuda_launch_succeeded(message);
}

template <typename T>
bool launch_backward(const DiagScanGrads<T>& grads, DiagScanShape shape, void* stream,
                     const char** message) {
  const int64_t blocks = diag_scan_blocks(shape);
  if (blocks == 0) return true;
  diag_scan_backward_kernel<T>
      <<<static_cast<unsigned>(blocks), kDiagScanThreadsPerBlock, 0, cuda_stream(stream)>>>(grads,
                                                                                            shape);
  return cuda_launch_succeeded(message);
}

DiagScanGrads<__nv_bfloat16> bf16_grads(const DiagScanGrads<Bf16Bits>& g) {
  return {as_bf16(g.a),           as_bf16(g.h),      as_bf16(g.h0),     as_bf16(g.grad_h),
          as_bf16(g.grad_h_last), as_bf16(g.grad_a), as_bf16(g.grad_b), as_bf16(g.grad_h0)};
}

}  // namespace

bool diag_scan_forward_cuda(const float* a, const float* b, const float* h0, float* h,
                            float* h_last, DiagScanShape shape, void* stream,
                            const char** message) {
  return launch_forward(a, b, h0, h, h_last, shape, stream, message);
}

bool diag_scan_forward_cuda(const Bf16Bits* a, const Bf16Bits* b, const Bf16Bits* h0, Bf16Bits* h,
                            Bf16Bits* h_last, DiagScanShape shape, void* stream,
                            const char** message) {
  return launch_forward(as_bf16(a), as_bf16(b), as_bf16(h0), as_bf16(h), as_bf16(h_last), shape,
                        stream, message);
}

bool diag_scan_backward_cuda(const DiagScanGrads<float>& grads, DiagScanShape shape, void* stream,
                             const char** message) {
  return launch_backward(grads, shape, stream, message);
}

bool diag_scan_backward_cuda(const DiagScanGrads<Bf16Bits>& grads, DiagScanShape shape,
                             void* stream, const char** message) {
  return launch_backward(bf16_grads(grads), shape, stream, message);
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
