#pragma once

#include "runtime/torch.h"

namespace memscript::ops {

// The parameters of a decoder block's MLP half: its layer norm, and the two linear layers
// around the GELU.
struct MlpWeights {
  torch::Tensor norm_weight, norm_bias;
  double eps;
  torch::Tensor up_weight, up_bias, down_weight, down_bias;
};

// y = h + W_down gelu(W_up LN(h) + b_up) + b_down with h = x + m: the residual stream x joined
// by the mixer's output m, then the MLP, as one autograd node. On the CPU in float32/float64
// with weights small enough for kernels/linear/linear.h, one pass over the rows
// (kernels/mlp_block/mlp_block.h, parameter gradients the same bits for any thread count);
// otherwise the separate fused ops of residual_mlp_reference.
torch::Tensor residual_mlp(const torch::Tensor& x, const torch::Tensor& m, const MlpWeights& w);

// The same from separate ops (fused layer norm and linear layers): the path for large widths
// and off the CPU, and the tests' oracle.
torch::Tensor residual_mlp_reference(const torch::Tensor& x, const torch::Tensor& m,
                                     const MlpWeights& w);

}  // namespace memscript::ops
