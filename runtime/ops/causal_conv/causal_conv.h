#pragma once

#include "runtime/torch.h"

namespace memscript::ops {

struct CausalConvResult {
  torch::Tensor u;             // [batch, length, channels]
  torch::Tensor window_after;  // [batch, channels, K − 1]: the next chunk's window
};

// u = silu(causal depthwise convolution of x [batch, length, channels], with `window`
// [batch, channels, K − 1] before it (undefined: zeros)), weight [channels, 1, K] and bias
// [channels] as torch::nn::Conv1d holds them (Mamba's conv, short_conv). One autograd node
// through kernels/causal_conv/ where that kernel takes the tensors (CPU float32 and float64, x's
// channels contiguous: x may be a slice of a wider last axis, as Mamba's half of its input
// projection is), causal_conv_silu_reference() otherwise.
CausalConvResult causal_conv_silu(const torch::Tensor& x, const torch::Tensor& window,
                                  const torch::Tensor& weight, const torch::Tensor& bias);

// The same from libtorch's conv1d and ops::activation (impl = "reference", and the tests'
// oracle).
CausalConvResult causal_conv_silu_reference(const torch::Tensor& x, const torch::Tensor& window,
                                            const torch::Tensor& weight, const torch::Tensor& bias);

}  // namespace memscript::ops
