#pragma once

#include <optional>

#include "runtime/torch.h"

namespace memscript::ops {

struct CausalConvResult {
  torch::Tensor u;             // [batch, length, channels]
  torch::Tensor window_after;  // [batch, channels, K − 1]: the next chunk's window
};

// u = silu(causal depthwise convolution of x [batch, length, channels], with `window`
// [batch, channels, K − 1] before it (undefined: zeros)), weight [channels, 1, K] and bias
// [channels] as torch::nn::Conv1d holds them, as one autograd node through
// kernels/causal_conv/causal_conv.h. x may be a slice of a wider last axis (Mamba's half of its
// input projection): only its channels must be contiguous. nullopt where that kernel does not run
// (off the CPU, dtypes other than float32 and float64, empty inputs): the caller composes Conv1d
// and the SiLU, as causal_conv_silu_reference does.
std::optional<CausalConvResult> causal_conv_silu(const torch::Tensor& x,
                                                 const torch::Tensor& window,
                                                 const torch::Tensor& weight,
                                                 const torch::Tensor& bias);

// The same from libtorch's Conv1d and ops::activation: the tests' oracle, and Mamba's path
// where the kernel does not run.
CausalConvResult causal_conv_silu_reference(const torch::Tensor& x, const torch::Tensor& window,
                                            const torch::Tensor& weight, const torch::Tensor& bias);

// What a mixer with an `impl` option runs: causal_conv_silu when `fused` and the kernel takes
// these tensors, causal_conv_silu_reference otherwise (Mamba's conv, short_conv).
CausalConvResult causal_conv_silu_or_reference(bool fused, const torch::Tensor& x,
                                               const torch::Tensor& window,
                                               const torch::Tensor& weight,
                                               const torch::Tensor& bias);

}  // namespace memscript::ops
