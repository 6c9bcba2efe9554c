#pragma once

#include "runtime/torch.h"

namespace memscript::ops {

// A decoder block's pre-norm, its parameters as torch::nn::LayerNorm holds them: what the block
// hands its mixer when the mixer applies the norm itself (kernels/gated_block/gated_block.h).
// A LayerNorm, or an RMSNorm where `bias` is undefined.
struct PreNorm {
  torch::Tensor weight;
  torch::Tensor bias;
  double eps;
};

// LayerNorm over the last axis of x (any leading shape), the same formula and parameters as
// torch::nn::LayerNorm, as one autograd node: on the CPU in float32/float64 through
// kernels/layer_norm/layer_norm.h, whose parameter gradients are the same bits for any thread
// count; elsewhere (CUDA, other dtypes) through composed libtorch ops.
torch::Tensor layer_norm(const torch::Tensor& x, const torch::Tensor& weight,
                         const torch::Tensor& bias, double eps);

// The composed-op version: the oracle of the tests, and the path off the CPU.
torch::Tensor layer_norm_reference(const torch::Tensor& x, const torch::Tensor& weight,
                                   const torch::Tensor& bias, double eps);

// RMSNorm over the last axis: x / sqrt(mean(x²) + eps), times `weight` where it is defined, in
// composed libtorch ops (no kernel: it is never on the hot path alone). Serves the per-head
// read-out of retnet and gla, deltanet's o_norm, hgrn2's norm and the script's ctx:rms_norm.
torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps);

// `norm` applied to x: layer_norm, or rms_norm where norm.bias is undefined.
torch::Tensor pre_norm(const torch::Tensor& x, const PreNorm& norm);

}  // namespace memscript::ops
