#pragma once

#include "runtime/torch.h"

namespace memscript::ops {

// A layer norm's parameters, as torch::nn::LayerNorm holds them: what a decoder block hands its
// mixer when the mixer applies the block's pre-norm itself (kernels/gated_block/gated_block.h).
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

}  // namespace memscript::ops
