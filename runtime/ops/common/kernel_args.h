#pragma once

// Turning tensors into the raw arguments of kernels/: pointers and strides, the element type a
// kernel is instantiated for, and the stream a CUDA kernel is launched on. Shared by the fused
// ops of this folder.

#include <c10/core/DeviceGuard.h>

#include <type_traits>

#include "kernels/common/sequence_view.h"
#include "kernels/common/storage_type.h"
#include "runtime/ops/common/launch.h"
#include "runtime/torch.h"

namespace memscript::ops {

// The kernels read every tensor with a contiguous last dimension; other strides pass as they
// are, so a head-split view of a projection needs no copy.
torch::Tensor width_contiguous(const torch::Tensor& x);

// x: [batch, heads, length, width] or [batch, heads, length]; undefined gives a null view.
template <typename P>
kernels::SequenceView<P> sequence_view(const torch::Tensor& x) {
  if (!x.defined()) return {};
  return {static_cast<P*>(x.data_ptr()), x.stride(0), x.stride(1), x.stride(2)};
}

// A contiguous tensor's data, or null when undefined.
template <typename P>
P* data_or_null(const torch::Tensor& x) {
  return x.defined() ? static_cast<P*>(x.data_ptr()) : nullptr;
}

// autograd::Function::apply takes no undefined tensor: an optional input passes as an empty
// tensor and turns back into an undefined one inside.
torch::Tensor present_or_empty(const torch::Tensor& x, const torch::Tensor& like);
torch::Tensor undefined_if_empty(const torch::Tensor& x);

// The dtype the kernels keep states in for inputs of `dtype`: float for bf16, else itself.
torch::ScalarType state_dtype(torch::ScalarType dtype);

// Calls f(std::type_identity<T>{}) with the kernels' element type for x's dtype and device:
// double or float on the CPU, float or bf16 on CUDA. Anything else is an error naming both.
template <typename F>
void dispatch_element_type(const torch::Tensor& x, const char* op, F&& f) {
  const torch::ScalarType dtype = x.scalar_type();
  if (dtype == torch::kFloat) return f(std::type_identity<float>{});
  if (dtype == torch::kDouble && !x.is_cuda()) return f(std::type_identity<double>{});
  if (dtype == torch::kBFloat16 && x.is_cuda()) return f(std::type_identity<kernels::Bf16>{});
  TORCH_CHECK(false, op, ": the fused kernels take float32 or float64 on the CPU and float32 or ",
              "bfloat16 on CUDA, not ", dtype, " on ", x.device(), "; use impl = \"reference\"");
}

// Runs a kernel over `count` independent indices (rows or heads) on the CPU pool, or launches
// it on the current CUDA stream of `like`. double has no CUDA kernel and bf16 no CPU one
// (dispatch_element_type never asks for either).
template <typename T, typename Cpu, typename Cuda>
void run_on_device(const char* op, const torch::Tensor& like, int64_t count, int64_t work_per_index,
                   Cpu&& cpu, Cuda&& cuda) {
  if (like.is_cuda()) {
    if constexpr (!std::is_same_v<T, double>) {
      const c10::DeviceGuard on_device(like.device());
      const char* message = nullptr;
      check_launch(cuda(cuda_stream_of(like), &message), message, op);
    }
  } else if constexpr (!std::is_same_v<T, kernels::Bf16>) {
    parallel_over(count, work_per_index, cpu);
  }
}

}  // namespace memscript::ops
