#pragma once

// Linear attention (kernels/linear_attention.h) as an autograd op on tensors: the fused
// counterpart of linear_attention() in runtime/model/mixers/linear_attention.h, with the same
// arguments and results.

#include "runtime/torch.h"

namespace memscript::fused {

struct LinearAttentionResult {
  torch::Tensor outputs;     // [batch, heads, length, dv]
  torch::Tensor sum;         // S after the last token: [batch, heads, dk, dv]
  torch::Tensor normaliser;  // z after the last token: [batch, heads, dk]
};

// phi_q, phi_k [batch, heads, length, dk] (features already mapped); v [batch, heads, length,
// dv]; sum [batch, heads, dk, dv] and normaliser [batch, heads, dk], both undefined to start
// from zero. Views are read in place as long as their last dimension is contiguous; the
// outputs are a view of a [batch, length, heads, dv] tensor, so merging heads copies nothing.
LinearAttentionResult linear_attention(const torch::Tensor& phi_q, const torch::Tensor& phi_k,
                                       const torch::Tensor& v, const torch::Tensor& sum,
                                       const torch::Tensor& normaliser, double eps);

}  // namespace memscript::fused
