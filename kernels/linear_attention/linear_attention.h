#pragma once

// Linear attention on features already mapped (φ(q), φ(k)), per batch element and head:
//
//   S_t = S_{t-1} + φk_t v_tᵀ   [dk, dv],   z_t = z_{t-1} + φk_t   [dk]
//   o_t = S_tᵀ φq_t / (z_tᵀ φq_t + eps)
//
// The state only ever adds, so the backward needs no stored states: with n_t = S_tᵀ φq_t and
// d_t = z_tᵀ φq_t + eps,
//   ∂n_t = ∂o_t / d_t,   ∂d_t = −(∂o_t · o_t) / d_t,   ∂φq_t = S_t ∂n_t + z_t ∂d_t
//   G_t = ∂S_L + Σ_{τ≥t} φq_τ ∂n_τᵀ,   g_t = ∂z_L + Σ_{τ≥t} φq_τ ∂d_τ
//   ∂φk_t = G_t v_t + g_t,   ∂v_t = G_tᵀ φk_t,   ∂S_0 = G_1,   ∂z_0 = g_1
// One pass forward in time recomputes S_t, z_t for ∂φq; one pass backward accumulates G, g.
// The forward saves only d_t (one number per token) for the backward, and nothing at all
// without gradients: its memory is the dk·dv + dk state per head, whatever the length.
//
// Why linear attention is not a member of the delta-rule family (kernels/delta_rule/), which
// serves deltanet, gated_deltanet, retnet and gla with compile-time features: its update is the
// family's additive one with α = β = 1, and z could ride along as a value column of ones (as the
// stdlib's mLSTM does), but a state that only adds splits the backward into the two passes
// above and stores one number per token, where the family's backward must keep a state
// checkpoint every √L tokens and recompute the states between them. The family would cost
// linear attention memory for nothing.
//
// z is shared by every column of S and the gradients of φq, φk sum over columns, so on the CPU
// both directions run one head per thread, every sum in the order of the scalar bodies below:
// bit-identical whatever the thread count. The CPU kernels (linear_attention_cpu.cpp) loop in
// another order so that their vector lanes are independent outputs; the CUDA kernels
// (linear_attention_cuda.cu) give a head a block and its rows and columns threads, each sum in
// the same order.

#include <cstdint>

#include "kernels/common/cuda_device.h"
#include "kernels/common/fixed_dims.h"
#include "kernels/common/sequence_view.h"
#include "kernels/common/storage_type.h"

namespace memscript::kernels {

struct LinearAttentionShape {
  int64_t batch;
  int64_t heads;
  int64_t length;
  int64_t key_dim;
  int64_t value_dim;

  MS_HOST_DEVICE int64_t head_count() const { return batch * heads; }
  MS_HOST_DEVICE int64_t matrix_size() const { return key_dim * value_dim; }
  // Acc elements of backward workspace one head needs: S, G and G again by columns, and on the
  // CPU four vectors of dk and two of dv beside them (linear_attention_cpu.cpp). The scalar
  // bodies below use a prefix of it.
  MS_HOST_DEVICE int64_t workspace_per_head() const {
    return 3 * matrix_size() + 4 * key_dim + 2 * value_dim;
  }
};

// phi_q, phi_k: [.., dk]; v, outputs: [.., dv]. States are Acc and contiguous: sum [batch,
// heads, dk, dv], normaliser [batch, heads, dk]; denominators [batch, heads, length].
template <typename T>
struct LinearAttentionForward {
  using Acc = AccumulatorOf<T>;
  SequenceView<const T> phi_q, phi_k, v;
  const Acc* sum_in;         // null: start from zero (then normaliser_in is null too)
  const Acc* normaliser_in;  //
  SequenceView<T> outputs;
  Acc* sum_out;  // the final state; the running state while the forward runs
  Acc* normaliser_out;
  Acc* denominators;  // null: no backward will follow
  Acc eps;
  LinearAttentionShape shape;
};

template <typename T>
struct LinearAttentionBackward {
  using Acc = AccumulatorOf<T>;
  SequenceView<const T> phi_q, phi_k, v, outputs;
  const Acc* sum_in;  // null: the forward started from zero
  const Acc* normaliser_in;
  const Acc* denominators;
  SequenceView<const T> grad_outputs;  // null: the outputs were not used
  const Acc* grad_sum_out;             // null: the final state was not used
  const Acc* grad_normaliser_out;      // null: the final normaliser was not used
  SequenceView<T> grad_phi_q, grad_phi_k, grad_v;
  Acc* grad_sum_in;  // null: not wanted
  Acc* grad_normaliser_in;
  Acc* workspace;  // shape.workspace_per_head() per head
  LinearAttentionShape shape;
};

// Adds token t into the running S and z of one head.
template <typename T, typename Acc>
MS_HOST_DEVICE inline void linear_attention_accumulate(Acc* sum, Acc* normaliser, const T* phi_k,
                                                       const T* v, int64_t key_dim,
                                                       int64_t value_dim) {
  for (int64_t a = 0; a < key_dim; ++a) {
    const Acc key = load(phi_k[a]);
    normaliser[a] += key;
    for (int64_t j = 0; j < value_dim; ++j) sum[a * value_dim + j] += key * load(v[j]);
  }
}

template <typename Acc>
MS_HOST_DEVICE inline void copy_or_zero(const Acc* from, Acc* to, int64_t count) {
  for (int64_t n = 0; n < count; ++n) to[n] = from ? from[n] : Acc(0);
}

// Copies one head's S and z (or zeros, when `sum_in` is null) into sum and normaliser.
template <typename Acc>
MS_HOST_DEVICE inline void linear_attention_start(const LinearAttentionShape& shape,
                                                  const Acc* sum_in, const Acc* normaliser_in,
                                                  int64_t head_index, Acc* sum, Acc* normaliser) {
  const int64_t matrix = shape.matrix_size(), dk = shape.key_dim;
  copy_or_zero(sum_in ? sum_in + head_index * matrix : nullptr, sum, matrix);
  copy_or_zero(normaliser_in ? normaliser_in + head_index * dk : nullptr, normaliser, dk);
}

template <typename T, int64_t KeyDim = 0, int64_t ValueDim = 0>
MS_HOST_DEVICE inline void linear_attention_forward_head(const LinearAttentionForward<T>& p,
                                                         int64_t head_index) {
  using Acc = AccumulatorOf<T>;
  const LinearAttentionShape& shape = p.shape;
  const int64_t b = head_index / shape.heads, h = head_index % shape.heads;
  const int64_t dk = dim_of<KeyDim>(shape.key_dim), dv = dim_of<ValueDim>(shape.value_dim);
  Acc* sum = p.sum_out + head_index * shape.matrix_size();
  Acc* normaliser = p.normaliser_out + head_index * dk;
  linear_attention_start(shape, p.sum_in, p.normaliser_in, head_index, sum, normaliser);
  for (int64_t t = 0; t < shape.length; ++t) {
    linear_attention_accumulate(sum, normaliser, p.phi_k.at(b, h, t), p.v.at(b, h, t), dk, dv);
    const T* phi_q = p.phi_q.at(b, h, t);
    Acc denominator = 0;
    for (int64_t a = 0; a < dk; ++a) denominator += normaliser[a] * load(phi_q[a]);
    denominator += p.eps;
    if (p.denominators) p.denominators[head_index * shape.length + t] = denominator;
    T* out = p.outputs.at(b, h, t);
    for (int64_t j = 0; j < dv; ++j) {
      Acc numerator = 0;
      for (int64_t a = 0; a < dk; ++a) numerator += sum[a * dv + j] * load(phi_q[a]);
      store(numerator / denominator, out + j);
    }
  }
}

// ∂d_t = −(∂o_t · o_t) / d_t; zero when the outputs were not used.
template <typename T>
MS_HOST_DEVICE inline AccumulatorOf<T> linear_attention_grad_denominator(
    const LinearAttentionBackward<T>& p, int64_t b, int64_t h, int64_t t,
    AccumulatorOf<T> denominator, int64_t value_dim) {
  using Acc = AccumulatorOf<T>;
  if (!p.grad_outputs) return Acc(0);
  const T* grad_out = p.grad_outputs.at(b, h, t);
  const T* out = p.outputs.at(b, h, t);
  Acc dot = 0;
  for (int64_t j = 0; j < value_dim; ++j) dot += load(grad_out[j]) * load(out[j]);
  return -dot / denominator;
}

// Forward in time: recomputes S_t, z_t and writes ∂φq_t = S_t ∂o_t / d_t + z_t ∂d_t.
template <typename T, int64_t KeyDim = 0, int64_t ValueDim = 0>
MS_HOST_DEVICE inline void linear_attention_grad_queries(const LinearAttentionBackward<T>& p,
                                                         int64_t head_index) {
  using Acc = AccumulatorOf<T>;
  const LinearAttentionShape& shape = p.shape;
  const int64_t b = head_index / shape.heads, h = head_index % shape.heads;
  const int64_t dk = dim_of<KeyDim>(shape.key_dim), dv = dim_of<ValueDim>(shape.value_dim);
  Acc* sum = p.workspace + head_index * shape.workspace_per_head();
  Acc* normaliser = sum + shape.matrix_size();
  linear_attention_start(shape, p.sum_in, p.normaliser_in, head_index, sum, normaliser);
  for (int64_t t = 0; t < shape.length; ++t) {
    linear_attention_accumulate(sum, normaliser, p.phi_k.at(b, h, t), p.v.at(b, h, t), dk, dv);
    const Acc denominator = p.denominators[head_index * shape.length + t];
    const Acc grad_denominator = linear_attention_grad_denominator(p, b, h, t, denominator, dv);
    T* grad_phi_q = p.grad_phi_q.at(b, h, t);
    for (int64_t a = 0; a < dk; ++a) {
      Acc recalled = 0;
      if (p.grad_outputs) {
        const T* grad_out = p.grad_outputs.at(b, h, t);
        for (int64_t j = 0; j < dv; ++j) recalled += sum[a * dv + j] * load(grad_out[j]);
      }
      store(recalled / denominator + normaliser[a] * grad_denominator, grad_phi_q + a);
    }
  }
}

// Backward in time: accumulates G and g, writes ∂φk_t, ∂v_t and the initial state's gradient.
template <typename T, int64_t KeyDim = 0, int64_t ValueDim = 0>
MS_HOST_DEVICE inline void linear_attention_grad_keys_values(const LinearAttentionBackward<T>& p,
                                                             int64_t head_index) {
  using Acc = AccumulatorOf<T>;
  const LinearAttentionShape& shape = p.shape;
  const int64_t b = head_index / shape.heads, h = head_index % shape.heads;
  const int64_t dk = dim_of<KeyDim>(shape.key_dim), dv = dim_of<ValueDim>(shape.value_dim);
  const int64_t matrix = dk * dv;
  Acc* grad_sum = p.workspace + head_index * shape.workspace_per_head() + matrix + dk;
  Acc* grad_normaliser = grad_sum + matrix;
  Acc* grad_numerator = grad_normaliser + dk;  // ∂o_t / d_t, once per token
  linear_attention_start(shape, p.grad_sum_out, p.grad_normaliser_out, head_index, grad_sum,
                         grad_normaliser);
  for (int64_t t = shape.length - 1; t >= 0; --t) {
    const Acc denominator = p.denominators[head_index * shape.length + t];
    const Acc grad_denominator = linear_attention_grad_denominator(p, b, h, t, denominator, dv);
    const T* phi_q = p.phi_q.at(b, h, t);
    if (p.grad_outputs) {
      const T* grad_out = p.grad_outputs.at(b, h, t);
      for (int64_t j = 0; j < dv; ++j) grad_numerator[j] = load(grad_out[j]) / denominator;
    }
    for (int64_t a = 0; a < dk; ++a) {
      const Acc query = load(phi_q[a]);
      if (p.grad_outputs) {
        for (int64_t j = 0; j < dv; ++j) grad_sum[a * dv + j] += query * grad_numerator[j];
      }
      grad_normaliser[a] += query * grad_denominator;
    }
    const T* phi_k = p.phi_k.at(b, h, t);
    const T* v = p.v.at(b, h, t);
    for (int64_t a = 0; a < dk; ++a) {
      Acc grad_key = 0;
      for (int64_t j = 0; j < dv; ++j) grad_key += grad_sum[a * dv + j] * load(v[j]);
      store(grad_key + grad_normaliser[a], p.grad_phi_k.at(b, h, t) + a);
    }
    for (int64_t j = 0; j < dv; ++j) {
      Acc grad_value = 0;
      for (int64_t a = 0; a < dk; ++a) grad_value += grad_sum[a * dv + j] * load(phi_k[a]);
      store(grad_value, p.grad_v.at(b, h, t) + j);
    }
  }
  if (p.grad_sum_in) copy_or_zero(grad_sum, p.grad_sum_in + head_index * matrix, matrix);
  if (p.grad_normaliser_in)
    copy_or_zero(grad_normaliser, p.grad_normaliser_in + head_index * dk, dk);
}

template <typename T, int64_t KeyDim = 0, int64_t ValueDim = 0>
MS_HOST_DEVICE inline void linear_attention_backward_head(const LinearAttentionBackward<T>& p,
                                                          int64_t head_index) {
  linear_attention_grad_queries<T, KeyDim, ValueDim>(p, head_index);
  linear_attention_grad_keys_values<T, KeyDim, ValueDim>(p, head_index);
}

// The bodies above are the scalar reference: one head at a time, every sum one chain in one
// order. The CPU kernels below give their bits (tests/kernels); the CUDA kernels, a block per
// head, agree with the CPU to rounding (tests/gpu).
// CPU: heads [begin, end) of shape.head_count(); the caller splits the range across its pool.
void linear_attention_forward_cpu(const LinearAttentionForward<float>& p, int64_t begin,
                                  int64_t end);
void linear_attention_forward_cpu(const LinearAttentionForward<double>& p, int64_t begin,
                                  int64_t end);
void linear_attention_backward_cpu(const LinearAttentionBackward<float>& p, int64_t begin,
                                   int64_t end);
void linear_attention_backward_cpu(const LinearAttentionBackward<double>& p, int64_t begin,
                                   int64_t end);

// CUDA, float32 or bf16 (kernels/common/cuda_device.h says what a launcher takes and returns).
MEMSCRIPT_CUDA_LAUNCHER(linear_attention_forward_cuda, const LinearAttentionForward<float>&);
MEMSCRIPT_CUDA_LAUNCHER(linear_attention_forward_cuda, const LinearAttentionForward<Bf16>&);
MEMSCRIPT_CUDA_LAUNCHER(linear_attention_backward_cuda, const LinearAttentionBackward<float>&);
MEMSCRIPT_CUDA_LAUNCHER(linear_attention_backward_cuda, const LinearAttentionBackward<Bf16>&);

}  // namespace memscript::kernels
