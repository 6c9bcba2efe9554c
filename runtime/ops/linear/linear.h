#pragma once

#include "kernels/common/activation.h"
#include "runtime/torch.h"

namespace memscript::ops {

// What ops::linear applies to x Wᵀ + b before returning it: the MLP's GELU, DeltaNet's β =
// σ(·), linear attention's feature maps elu(·) + 1 and relu(·), the step sizes' softplus(·),
// Mamba's SiLU (kernels/common/activation.h).
using Activation = kernels::ActivationKind;

// y = activation(x Wᵀ + b) over the last axis of x (any leading shape) as one autograd node:
// x is read as a [rows, in] matrix, so a [batch, length, in] activation costs one addmm forward
// and two matrix products (plus a sum for the bias) backward, instead of the reshapes, views
// and transposes of torch::nn::Linear on a 3-D input, and the activation in the same node.
// `bias` may be undefined.
torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                     Activation activation = Activation::none);

// The activation alone as one autograd node: kernels/common/activation.h on the CPU (float32,
// float64), composed libtorch ops elsewhere.
torch::Tensor activation(const torch::Tensor& x, Activation activation);

// The activation from composed libtorch ops: what the tests check the kernels against.
torch::Tensor activation_reference(const torch::Tensor& x, Activation activation);

inline torch::Tensor linear(const torch::nn::Linear& layer, const torch::Tensor& x,
                            Activation activation = Activation::none) {
  return linear(x, layer->weight, layer->bias, activation);
}

}  // namespace memscript::ops
