#include "runtime/model/fused/kernel_args.h"

#ifdef MEMSCRIPT_WITH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

namespace memscript::fused {

torch::Tensor width_contiguous(const torch::Tensor& x) {
  if (!x.defined() || x.stride(-1) == 1 || x.size(-1) == 1) return x;
  return x.contiguous();
}

torch::Tensor present_or_empty(const torch::Tensor& x, const torch::Tensor& like) {
  return x.defined() ? x : torch::empty({0}, like.options());
}

torch::Tensor undefined_if_empty(const torch::Tensor& x) {
  return x.numel() == 0 ? torch::Tensor() : x;
}

torch::ScalarType state_dtype(torch::ScalarType dtype) {
  return dtype == torch::kBFloat16 ? torch::kFloat : dtype;
}

void* cuda_stream_for([[maybe_unused]] const torch::Tensor& x) {
#ifdef MEMSCRIPT_WITH_CUDA
  return c10::cuda::getCurrentCUDAStream(x.get_device()).stream();
#else
  TORCH_CHECK(false, "memscript was built without CUDA kernels; cannot run on ", x.device());
#endif
}

void parallel_range(int64_t count, int64_t work_per_index,
                    const std::function<void(int64_t, int64_t)>& body) {
  // About 32k multiply-adds per task: below that, handing work to another thread costs more
  // than it saves.
  constexpr int64_t kWorkPerTask = 1 << 15;
  const int64_t grain = std::max<int64_t>(1, kWorkPerTask / std::max<int64_t>(1, work_per_index));
  at::parallel_for(0, count, grain, body);
}

}  // namespace memscript::fused
