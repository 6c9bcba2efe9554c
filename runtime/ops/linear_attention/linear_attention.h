#pragma once

// Linear attention per batch element and head, on features already mapped (φ ≥ 0):
//
//   S_t = S_{t-1} + φ(k_t) v_tᵀ,   z_t = z_{t-1} + φ(k_t),   o_t = S_tᵀ φ(q_t) / (z_tᵀ φ(q_t) +
//   eps)
//
// linear_attention() runs the kernels of kernels/linear_attention/ as one autograd op where they
// take the tensors (ops::kernels_take) and linear_attention_reference() otherwise; the
// reference, in libtorch ops, is also the oracle of the tests.

#include "runtime/torch.h"

namespace memscript::ops {

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

// The same in composed libtorch ops, block by block: quadratic inside a block, the state carried
// between blocks, which equals the step-by-step recurrence without its per-token loop and
// without the memory of a full length x length score matrix (impl = "reference").
LinearAttentionResult linear_attention_reference(const torch::Tensor& phi_q,
                                                 const torch::Tensor& phi_k, const torch::Tensor& v,
                                                 const torch::Tensor& sum,
                                                 const torch::Tensor& normaliser, double eps);

}  // namespace memscript::ops
