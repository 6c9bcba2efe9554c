#pragma once

// Causal softmax attention for the GPT mixer on the CPU, per batch element and head:
//
//   o_i = Σ_{j ≤ p_i} P_ij v_j,   P_ij = softmax_j(s_ij),
//   s_ij = scale · q_i · k_j − m_h (p_i − j)
//
// where query i sits at position p_i = keys − queries + i (the queries are the last of the keys:
// with a cache of earlier keys and values in front, p_i counts them), and m_h is head h's slope
// of ALiBi's linear bias (Press et al.; zero without slopes). The bias is a constant of the
// scores, so the backward below holds as written.
//
// Relative positions (Transformer-XL, Dai et al.), when given, add to each score
//
//   scale · q'_i · r_{h, p_i − j}
//
// where q' is the query with the position bias (q holds the one with the content bias) and
// r_{h,d} head h's key for distance d, so that ∂q'_i = scale Σ_j dS_ij r_{p_i − j} and
// ∂r_d = scale Σ_{i,j: p_i − j = d} dS_ij q'_i. A tile's queries are consecutive, so at key j
// its lanes' distances are too: one vector load from a transposed copy of the head's table.
//
// Sixteen queries go through
// at a time, one per vector lane, in two passes over the keys they see (the largest score, then
// the exponentials and the weighted sum), so the work is O(queries · keys · head_dim) and the
// memory one score per key, whatever the length. libtorch's CPU flash attention calls a BLAS
// product per block of queries, which at the study's head size (4) cost more than the attention
// itself.
//
// Backward, with the forward's log-sum-exp ℓ_i = log Σ_j exp(s_ij) kept per query:
//   P_ij = exp(s_ij − ℓ_i),  dP_ij = ∂o_i · v_j,  δ_i = ∂o_i · o_i,  dS_ij = P_ij (dP_ij − δ_i)
//   ∂q_i = scale Σ_j dS_ij k_j,  ∂k_j = scale Σ_i dS_ij q_i,  ∂v_j = Σ_i P_ij ∂o_i
// One head per work item; the sums over i add each lane's queries in order, then the lanes in
// order, so the gradients are the same bits for any thread count.
//
// There is no CUDA kernel: on a GPU the GPT mixer runs libtorch's fused attention.

#include <cstdint>

#include "kernels/common/sequence_view.h"

namespace memscript::kernels {

struct AttentionShape {
  int64_t batch;
  int64_t heads;
  int64_t queries;
  int64_t keys;  // ≥ queries
  int64_t head_dim;

  int64_t head_count() const { return batch * heads; }
  // The last key query i sees.
  int64_t last_key(int64_t i) const { return keys - queries + i; }
};

// q, out: [batch, heads, queries, head_dim]; k, v: [.., keys, head_dim]; log_sum_exp [batch,
// heads, queries] (null: no backward will follow).
template <typename T>
struct AttentionForward {
  SequenceView<const T> q, k, v;
  SequenceView<T> out;
  T* log_sum_exp;
  const T* slopes;  // [heads], ALiBi's m_h (null: no bias)
  T scale;
  AttentionShape shape;
  SequenceView<const T> q_position{};  // q' [batch, heads, queries, head_dim] (relative positions)
  const T* relative = nullptr;         // [heads, keys, head_dim], r_{h,d} (null: none)
};

template <typename T>
struct AttentionBackward {
  SequenceView<const T> q, k, v, out, grad_out;
  const T* log_sum_exp;
  const T* slopes;
  SequenceView<T> grad_q, grad_k, grad_v;
  T scale;
  AttentionShape shape;
  SequenceView<const T> q_position{};  // as in AttentionForward
  const T* relative = nullptr;
  SequenceView<T> grad_q_position{};
  T* grad_relative = nullptr;  // [batch, heads, keys, head_dim]: each batch element's share
};

// Heads [begin, end) of shape.head_count().
void causal_attention_forward_cpu(const AttentionForward<float>& p, int64_t begin, int64_t end);
void causal_attention_forward_cpu(const AttentionForward<double>& p, int64_t begin, int64_t end);
void causal_attention_backward_cpu(const AttentionBackward<float>& p, int64_t begin, int64_t end);
void causal_attention_backward_cpu(const AttentionBackward<double>& p, int64_t begin, int64_t end);

}  // namespace memscript::kernels
