#pragma once

#include "runtime/torch.h"

namespace memscript::fused {

// softmax(q kᵀ / sqrt(head_dim) + causal mask) v through kernels/causal_attention.h, as one
// autograd node. q [batch, heads, queries, head_dim], k and v [.., keys, head_dim] with
// keys ≥ queries: query i sees keys 0 .. keys − queries + i. Returns [batch, heads, queries,
// head_dim] as a view of a [batch, queries, heads, head_dim] tensor, so merging the heads
// needs no copy. CPU float32/float64 only (see runs_on_kernel).
torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v);

// Whether causal_attention runs these tensors (CPU, float32 or float64).
bool attention_runs_on_kernel(const torch::Tensor& q);

}  // namespace memscript::fused
