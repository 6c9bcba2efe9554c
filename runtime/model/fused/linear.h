#pragma once

#include "runtime/torch.h"

namespace memscript::fused {

enum class Activation { none, gelu };

// y = activation(x Wᵀ + b) over the last axis of x (any leading shape) as one autograd node:
// x is read as a [rows, in] matrix, so a [batch, length, in] activation costs one addmm forward
// and two matrix products (plus a sum for the bias) backward, instead of the reshapes, views
// and transposes of torch::nn::Linear on a 3-D input. `bias` may be undefined.
torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                     Activation activation = Activation::none);

inline torch::Tensor linear(const torch::nn::Linear& layer, const torch::Tensor& x,
                            Activation activation = Activation::none) {
  return linear(x, layer->weight, layer->bias, activation);
}

}  // namespace memscript::fused
