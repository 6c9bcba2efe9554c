#pragma once

// What the autograd Functions over kernels/ share: splitting (batch × channel) work over
// libtorch's thread pool, the CUDA stream to launch on, and turning a failed launch into an
// error.

#include "runtime/torch.h"

namespace memscript::ops {

// Runs body(begin, end) over [0, items) on the intra-op pool. `steps_per_item` (recurrence
// steps, or multiply-adds, per item) sizes the chunks so that small work does not pay the
// pool's overhead. Each item writes only its own
// outputs, so the result does not depend on how the range is split. Kernels call this, never
// at::parallel_for: only this file is compiled with OpenMP (runtime/CMakeLists.txt).
void parallel_over(int64_t items, int64_t steps_per_item,
                   const std::function<void(int64_t, int64_t)>& body);

// The current CUDA stream of the tensor's device, as the kernels' void* (a cudaStream_t).
void* cuda_stream_of(const torch::Tensor& tensor);

// Throws (naming the kernel) when a CUDA launcher returned false.
void check_launch(bool launched, const char* message, const char* kernel);

// Whether the tensor is one the CPU kernels take: on the CPU, float32 or float64. The fused
// ops fall back to composed libtorch ops for anything else.
bool on_cpu_kernels(const torch::Tensor& tensor);

// The one rule for what the hand-written kernels take: float32 or float64 on the CPU, float32
// on CUDA. A mixer asked for impl = "fused" runs its kernels when its input is such a tensor
// and its reference ops otherwise (float64 on CUDA, half precision), so that every dtype and
// device libtorch has trains, at libtorch's speed where no kernel is written for it.
bool kernels_take(const torch::Tensor& tensor);

// Throws unless every tensor has the first one's dtype and device, and the dtype is one the
// kernels have: float32 or float64 on the CPU, float32 (or bf16 where `bf16` is set) on CUDA.
void check_inputs(const char* kernel, std::initializer_list<torch::Tensor> tensors,
                  bool bf16 = false);

// The tensor's data as the kernels' raw pointer type; null for an undefined tensor.
template <typename T>
T* data(const torch::Tensor& tensor) {
  return tensor.defined() ? static_cast<T*>(tensor.data_ptr()) : nullptr;
}

}  // namespace memscript::ops
