// The CUDA kernels of the matrix-state recurrences (delta rule, linear attention): thin
// wrappers that hand blockIdx / threadIdx to the per-thread bodies in the headers.
#include <cuda_runtime.h>

#include "delta_rule.h"
#include "linear_attention.h"

namespace memscript::kernels {

namespace {

template <typename T>
__global__ void delta_rule_forward_kernel(DeltaRuleForward<T> p) {
  delta_rule_forward_thread(p, blockIdx.x, threadIdx.x, blockDim.x);
}

template <typename T>
__global__ void delta_rule_backward_kernel(DeltaRuleBackward<T> p) {
  delta_rule_backward_thread(p, blockIdx.x, threadIdx.x, blockDim.x);
}

template <typename T>
__global__ void linear_attention_forward_kernel(LinearAttentionForward<T> p) {
  linear_attention_forward_thread(p, blockIdx.x, threadIdx.x, blockDim.x);
}

template <typename T>
__global__ void linear_attention_backward_kernel(LinearAttentionBackward<T> p) {
  linear_attention_backward_thread(p, blockIdx.x, threadIdx.x, blockDim.x);
}

bool launched(const char** message) {
  const cudaError_t status = cudaGetLastError();
  if (status == cudaSuccess) return true;
  if (message) *message = cudaGetErrorString(status);
  return false;
}

template <typename Params>
bool launch(void (*kernel)(Params), const Params& p, int64_t blocks, int64_t threads, void* stream,
            const char** message) {
  if (blocks == 0) return true;
  kernel<<<static_cast<unsigned>(blocks), static_cast<unsigned>(threads), 0,
           static_cast<cudaStream_t>(stream)>>>(p);
  return launched(message);
}

template <typename T>
bool delta_rule_forward(const DeltaRuleForward<T>& p, void* stream, const char** message) {
  return launch(delta_rule_forward_kernel<T>, p, delta_rule_blocks(p.shape.row_count()),
                kDeltaRuleThreadsPerBlock, stream, message);
}

template <typename T>
bool delta_rule_backward(const DeltaRuleBackward<T>& p, void* stream, const char** message) {
  return launch(delta_rule_backward_kernel<T>, p, delta_rule_blocks(p.shape.head_count()),
                kDeltaRuleThreadsPerBlock, stream, message);
}

template <typename T>
bool linear_attention_forward(const LinearAttentionForward<T>& p, void* stream,
                              const char** message) {
  return launch(linear_attention_forward_kernel<T>, p, linear_attention_blocks(p.shape),
                kLinearAttentionThreadsPerBlock, stream, message);
}

template <typename T>
bool linear_attention_backward(const LinearAttentionBackward<T>& p, void* stream,
                               const char** message) {
  return launch(linear_attention_backward_kernel<T>, p, linear_attention_blocks(p.shape),
                kLinearAttentionThreadsPerBlock, stream, message);
}

}  // namespace

bool delta_rule_forward_cuda(const DeltaRuleForward<float>& p, void* stream, const char** message) {
  return delta_rule_forward(p, stream, message);
}
bool delta_rule_forward_cuda(const DeltaRuleForward<Bf16>& p, void* stream, const char** message) {
  return delta_rule_forward(p, stream, message);
}
bool delta_rule_backward_cuda(const DeltaRuleBackward<float>& p, void* stream,
                              const char** message) {
  return delta_rule_backward(p, stream, message);
}
bool delta_rule_backward_cuda(const DeltaRuleBackward<Bf16>& p, void* stream,
                              const char** message) {
  return delta_rule_backward(p, stream, message);
}

bool linear_attention_forward_cuda(const LinearAttentionForward<float>& p, void* stream,
                                   const char** message) {
  return linear_attention_forward(p, stream, message);
}
bool linear_attention_forward_cuda(const LinearAttentionForward<Bf16>& p, void* stream,
                                   const char** message) {
  return linear_attention_forward(p, stream, message);
}
bool linear_attention_backward_cuda(const LinearAttentionBackward<float>& p, void* stream,
                                    const char** message) {
  return linear_attention_backward(p, stream, message);
}
bool linear_attention_backward_cuda(const LinearAttentionBackward<Bf16>& p, void* stream,
                                    const char** message) {
  return linear_attention_backward(p, stream, message);
}

}  // namespace memscript::kernels
