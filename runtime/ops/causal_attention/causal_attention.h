#pragma once

#include "runtime/torch.h"

namespace memscript::ops {

// softmax(q kᵀ / sqrt(head_dim) + B + causal mask) v for q [batch, heads, queries, head_dim] and
// k, v [.., keys, head_dim] with keys ≥ queries: the queries are the last of the keys' positions,
// so query i sees keys 0 .. p_i = keys − queries + i (a cache of earlier keys before them).
// B_hij = −slopes_h · (p_i − j), ALiBi's linear bias, where slopes [heads] is given (a constant:
// no gradient flows to it); B = 0 where slopes is undefined.
//
// causal_attention() runs causal_attention_kernel() where that kernel takes the tensors and is
// the faster choice (CPU float32/float64 up to kMaxKernelHeadDim), and libtorch's own fused
// scaled_dot_product_attention otherwise: unlike the recurrences, attention has a fast libtorch
// op for every dtype and device, so that, not the reference, is the fallback.
torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const torch::Tensor& slopes = {});

// kernels/causal_attention/ as one autograd node, at any head size (the tests, the bench). CPU
// float32/float64 only. Returns a [batch, heads, queries, head_dim] view of a [batch, queries,
// heads, head_dim] tensor, so merging the heads needs no copy.
torch::Tensor causal_attention_kernel(const torch::Tensor& q, const torch::Tensor& k,
                                      const torch::Tensor& v, const torch::Tensor& slopes = {});

// Written out: scores, bias, mask, softmax, weighted sum (impl = "reference", and the tests'
// oracle).
torch::Tensor causal_attention_reference(const torch::Tensor& q, const torch::Tensor& k,
                                         const torch::Tensor& v, const torch::Tensor& slopes = {});

// Transformer-XL's relative positions (Dai et al.): the scores of causal_attention() without
// a bias, plus q_position_i · r_{h, p_i − j} / sqrt(head_dim), where q holds the queries with the
// content bias, q_position [batch, heads, queries, head_dim] those with the position bias, and
// relative [heads, keys, head_dim] head h's key r_{h,d} for distance d = 0 .. keys − 1.
// Gradients flow to all five. The kernel on the CPU (float32/float64, any head size: libtorch
// has no op that would be faster), the composed ops elsewhere.
torch::Tensor causal_attention_relative(const torch::Tensor& q, const torch::Tensor& k,
                                        const torch::Tensor& v, const torch::Tensor& q_position,
                                        const torch::Tensor& relative);
torch::Tensor causal_attention_relative_kernel(const torch::Tensor& q, const torch::Tensor& k,
                                               const torch::Tensor& v,
                                               const torch::Tensor& q_position,
                                               const torch::Tensor& relative);
torch::Tensor causal_attention_relative_reference(const torch::Tensor& q, const torch::Tensor& k,
                                                  const torch::Tensor& v,
                                                  const torch::Tensor& q_position,
                                                  const torch::Tensor& relative);

// p_i − j for query i (row) and key j (column) in the causal_attention() layout, int64
// [queries, keys] on `device`: negative where key j is in query i's future. What ALiBi's bias and
// relative positions (the gpt mixer) are functions of.
torch::Tensor query_key_distances(int64_t queries, int64_t keys, const torch::Device& device);

// ALiBi's slopes for `heads` heads, as Press et al.'s code computes them: 2^(−8i/n) for
// i = 1 .. n when heads = n is a power of two; otherwise those of the power of two n below
// heads, then every other slope of 2n's, from the first, for the rest. float64 [heads].
torch::Tensor alibi_slopes(int64_t heads);

// Up to this head size the kernel beats libtorch's CPU flash attention, whose BLAS calls per
// block of queries cost more than their arithmetic at such sizes; at head size 16 (preset small)
// libtorch's is faster (`make bench` compares the two).
constexpr int64_t kMaxKernelHeadDim = 8;

}  // namespace memscript::ops
