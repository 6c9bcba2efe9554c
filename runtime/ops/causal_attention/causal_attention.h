#pragma once

#include "runtime/torch.h"

namespace memscript::ops {

// softmax(q kᵀ / sqrt(head_dim) + causal mask) v for q [batch, heads, queries, head_dim] and k, v
// [.., keys, head_dim] with keys ≥ queries: the queries are the last of the keys' positions, so
// query i sees keys 0 .. keys − queries + i (a cache of earlier keys before them).
//
// causal_attention() runs causal_attention_kernel() where that kernel takes the tensors and is
// the faster choice (CPU float32/float64 up to kMaxKernelHeadDim), and libtorch's own fused
// scaled_dot_product_attention otherwise: unlike the recurrences, attention has a fast libtorch
// op for every dtype and device, so that, not the reference, is the fallback.
torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v);

// kernels/causal_attention/ as one autograd node, at any head size (the tests, the bench). CPU
// float32/float64 only. Returns a [batch, heads, queries, head_dim] view of a [batch, queries,
// heads, head_dim] tensor, so merging the heads needs no copy.
torch::Tensor causal_attention_kernel(const torch::Tensor& q, const torch::Tensor& k,
                                      const torch::Tensor& v);

// Written out: scores, mask, softmax, weighted sum (impl = "reference", and the tests' oracle).
torch::Tensor causal_attention_reference(const torch::Tensor& q, const torch::Tensor& k,
                                         const torch::Tensor& v);

// Up to this head size the kernel beats libtorch's CPU flash attention, whose BLAS calls per
// block of queries cost more than their arithmetic at such sizes; at head size 16 (preset small)
// libtorch's is faster (`make bench` compares the two).
constexpr int64_t kMaxKernelHeadDim = 8;

}  // namespace memscript::ops
