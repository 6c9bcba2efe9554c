#pragma once

#include "runtime/torch.h"

namespace memscript::ops {

// softmax(q kᵀ / sqrt(head_dim) + causal mask) v through
// kernels/causal_attention/causal_attention.h, as one autograd node. q [batch, heads, queries,
// head_dim], k and v [.., keys, head_dim] with keys ≥ queries: query i sees keys 0 .. keys −
// queries + i. Returns [batch, heads, queries, head_dim] as a view of a [batch, queries, heads,
// head_dim] tensor, so merging the heads needs no copy. CPU float32/float64 only (launch.h's
// on_cpu_kernels).
torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v);

// Whether causal_attention runs these tensors and is the faster choice. Up to this head size the
// kernel beats libtorch's CPU flash attention, whose BLAS calls per block of queries cost more than
// their arithmetic at such sizes; at head size 16 (preset small) libtorch's is faster
// (`make bench` compares the two).
constexpr int64_t kMaxPreferredHeadDim = 8;
bool attention_prefers_kernel(const torch::Tensor& q);

}  // namespace memscript::ops
