#include "runtime/ops/common/kernel_args.h"

namespace memscript::ops {

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

}  // namespace memscript::ops
