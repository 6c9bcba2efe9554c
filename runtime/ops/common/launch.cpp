#include "runtime/ops/common/launch.h"

#ifdef MEMSCRIPT_WITH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

namespace memscript::ops {

namespace {
// About this many recurrence steps per task before splitting pays for itself.
constexpr int64_t kStepsPerTask = 1 << 14;
}  // namespace

void parallel_over(int64_t items, int64_t steps_per_item,
                   const std::function<void(int64_t, int64_t)>& body) {
  const int64_t grain = std::max<int64_t>(1, kStepsPerTask / std::max<int64_t>(1, steps_per_item));
  // A lambda of this file's own: no file compiled without OpenMP can instantiate the same
  // parallel_for and have the linker keep its serial copy.
  at::parallel_for(0, items, grain, [&body](int64_t begin, int64_t end) { body(begin, end); });
}

void* cuda_stream_of([[maybe_unused]] const torch::Tensor& tensor) {
#ifdef MEMSCRIPT_WITH_CUDA
  return c10::cuda::getCurrentCUDAStream(tensor.device().index()).stream();
#else
  TORCH_CHECK(false, "memscript was built without CUDA kernels");
#endif
}

void check_launch(bool launched, const char* message, const char* kernel) {
  TORCH_CHECK(launched, kernel, ": CUDA launch failed: ", message ? message : "unknown error");
}

bool on_cpu_kernels(const torch::Tensor& tensor) {
  const auto dtype = tensor.scalar_type();
  return tensor.is_cpu() && (dtype == torch::kFloat || dtype == torch::kDouble);
}

bool kernels_take(const torch::Tensor& tensor) {
  return on_cpu_kernels(tensor) || (tensor.is_cuda() && tensor.scalar_type() == torch::kFloat);
}

void check_inputs(const char* kernel, std::initializer_list<torch::Tensor> tensors, bool bf16) {
  const torch::Tensor& first = *tensors.begin();
  for (const torch::Tensor& tensor : tensors) {
    TORCH_CHECK(tensor.scalar_type() == first.scalar_type() && tensor.device() == first.device(),
                kernel, ": inputs must share one dtype and device, got ", tensor.scalar_type(),
                " on ", tensor.device(), " and ", first.scalar_type(), " on ", first.device());
  }
  const auto dtype = first.scalar_type();
  if (first.is_cuda()) {
    TORCH_CHECK(dtype == torch::kFloat || (bf16 && dtype == torch::kBFloat16), kernel,
                ": CUDA kernels take float32", bf16 ? " or bfloat16" : "", ", got ", dtype);
  } else {
    TORCH_CHECK(first.is_cpu(), kernel, ": tensors on ", first.device(), " are not supported");
    TORCH_CHECK(dtype == torch::kFloat || dtype == torch::kDouble, kernel,
                ": CPU kernels take float32 or float64, got ", dtype);
  }
}

}  // namespace memscript::ops
