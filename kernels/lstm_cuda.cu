#include "kernels/cuda_launch.cuh"
#include "kernels/lstm.h"

namespace memscript::kernels {

namespace {

__global__ void lstm_forward_kernel(LstmForward<float> a, LstmShape s) {
  lstm_forward_thread(a, s, blockIdx.x, threadIdx.x, blockDim.x);
}

__global__ void lstm_backward_kernel(LstmBackward<float> a, LstmShape s) {
  lstm_backward_thread(a, s, blockIdx.x, threadIdx.x, blockDim.x);
}

}  // namespace

bool lstm_forward_cuda(const LstmForward<float>& a, LstmShape s, void* stream,
                       const char** message) {
  const int64_t blocks = lstm_blocks(s);
  if (blocks == 0) return true;
  lstm_forward_kernel<<<static_cast<unsigned>(blocks), kLstmThreadsPerBlock, 0,
                        cuda_stream(stream)>>>(a, s);
  return cuda_launch_succeeded(message);
}

bool lstm_backward_cuda(const LstmBackward<float>& a, LstmShape s, void* stream,
                        const char** message) {
  const int64_t blocks = lstm_blocks(s);
  if (blocks == 0) return true;
  lstm_backward_kernel<<<static_cast<unsigned>(blocks), kLstmThreadsPerBlock, 0,
                         cuda_stream(stream)>>>(a, s);
  return cuda_launch_succeeded(message);
}

}  // namespace memscript::kernels
