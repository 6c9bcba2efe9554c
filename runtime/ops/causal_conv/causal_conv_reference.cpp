#include "runtime/ops/causal_conv/causal_conv.h"

#include "runtime/ops/linear/linear.h"

namespace memscript::ops {

CausalConvResult causal_conv_silu_reference(const torch::Tensor& x, const torch::Tensor& window,
                                            const torch::Tensor& weight,
                                            const torch::Tensor& bias) {
  const int64_t keep = weight.size(-1) - 1;
  const torch::Tensor before =
      window.defined() ? window : torch::zeros({x.size(0), x.size(2), keep}, x.options());
  // No tokens: nothing to convolve (conv1d refuses a kernel longer than its input), and the
  // window passes through.
  if (x.size(1) == 0) return {torch::empty_like(x), before};
  const torch::Tensor padded = torch::cat({before, x.transpose(1, 2)}, 2);
  const std::vector<int64_t> one = {1}, none = {0};  // stride and dilation; padding
  const torch::Tensor convolved =
      torch::conv1d(padded, weight, bias, one, none, one, /*groups=*/x.size(2)).transpose(1, 2);
  return {activation(convolved, Activation::silu), padded.narrow(2, padded.size(2) - keep, keep)};
}

}  // namespace memscript::ops
