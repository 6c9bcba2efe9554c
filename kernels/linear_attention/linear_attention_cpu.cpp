#include <vector>

#include "kernels/linear_attention/linear_attention.h"

// The CPU kernels do the scalar bodies' arithmetic (linear_attention.h) in another loop order.
// There every output sums over the other index with a stride: the numerator of o_t[j] down
// column j of S, ∂φq_t[a] and ∂φk_t[a] along row a of S and of G, ∂v_t[j] down column j of G,
// each one chain of dependent additions. Here the summed index is the outer loop and the
// outputs the inner, contiguous one, so that the compiler's vector lanes are independent
// outputs, each adding its terms in the scalar body's order: the same bits. The sums along rows
// then need the matrix by columns: the backward keeps S by columns and G both ways, as the CUDA
// kernel does, each copy updated with the same products.

namespace memscript::kernels {

namespace {

// row[j] += key · v[j], then sums[j] += row[j] · weight, for j < width.
template <typename T, typename Acc>
inline void add_outer_and_weigh(Acc* __restrict row, Acc key, const T* __restrict v, Acc weight,
                                Acc* __restrict sums, int64_t width) {
  for (int64_t j = 0; j < width; ++j) {
    row[j] += key * load(v[j]);
    sums[j] += row[j] * weight;
  }
}

// sums[j] += row[j] · weight, for j < width.
template <typename Acc>
inline void weigh(const Acc* __restrict row, Acc weight, Acc* __restrict sums, int64_t width) {
  for (int64_t j = 0; j < width; ++j) sums[j] += row[j] * weight;
}

// row[j] += load(x[j]) · scale, for j < width.
template <typename T, typename Acc>
inline void add_scaled(Acc* __restrict row, const T* __restrict x, Acc scale, int64_t width) {
  for (int64_t j = 0; j < width; ++j) row[j] += load(x[j]) * scale;
}

template <typename Acc>
inline void fill_zero(Acc* values, int64_t count) {
  for (int64_t n = 0; n < count; ++n) values[n] = 0;
}

// The matrix `rows` [dk, dv] (zeros when null) into `columns` [dv, dk].
template <typename Acc>
inline void transpose_or_zero(const Acc* rows, int64_t dk, int64_t dv, Acc* columns) {
  for (int64_t j = 0; j < dv; ++j) {
    for (int64_t a = 0; a < dk; ++a) columns[j * dk + a] = rows ? rows[a * dv + j] : Acc(0);
  }
}

// Head `index` of a shape: its batch row b and head h, and its sizes (fixed where compiled).
template <int64_t KeyDim, int64_t ValueDim>
struct HeadAt {
  int64_t index, b, h, dk, dv;

  HeadAt(const LinearAttentionShape& shape, int64_t head_index)
      : index(head_index),
        b(head_index / shape.heads),
        h(head_index % shape.heads),
        dk(dim_of<KeyDim>(shape.key_dim)),
        dv(dim_of<ValueDim>(shape.value_dim)) {}
};

// `numerator`: dv numbers of scratch.
template <typename T, int64_t KeyDim, int64_t ValueDim>
void forward_head(const LinearAttentionForward<T>& p, const HeadAt<KeyDim, ValueDim>& head,
                  AccumulatorOf<T>* numerator) {
  using Acc = AccumulatorOf<T>;
  const LinearAttentionShape& shape = p.shape;
  const int64_t head_index = head.index, b = head.b, h = head.h, dk = head.dk, dv = head.dv;
  Acc* sum = p.sum_out + head_index * shape.matrix_size();
  Acc* normaliser = p.normaliser_out + head_index * dk;
  linear_attention_start(shape, p.sum_in, p.normaliser_in, head_index, sum, normaliser);
  for (int64_t t = 0; t < shape.length; ++t) {
    const T* phi_q = p.phi_q.at(b, h, t);
    const T* phi_k = p.phi_k.at(b, h, t);
    const T* v = p.v.at(b, h, t);
    fill_zero(numerator, dv);
    Acc denominator = 0;
    for (int64_t a = 0; a < dk; ++a) {
      const Acc key = load(phi_k[a]), query = load(phi_q[a]);
      normaliser[a] += key;
      denominator += normaliser[a] * query;
      add_outer_and_weigh(sum + a * dv, key, v, query, numerator, dv);
    }
    denominator += p.eps;
    if (p.denominators) p.denominators[head_index * shape.length + t] = denominator;
    T* out = p.outputs.at(b, h, t);
    for (int64_t j = 0; j < dv; ++j) store(numerator[j] / denominator, out + j);
  }
}

// One head's backward workspace on the CPU (shape.workspace_per_head() numbers).
template <typename Acc>
struct BackwardScratch {
  Acc* sum_columns;       // S_t by columns [dv, dk]
  Acc* normaliser;        // z_t [dk]
  Acc* recalled;          // S_t ∂o_t [dk]
  Acc* grad_sum;          // G_t by rows [dk, dv]
  Acc* grad_sum_columns;  // G_t by columns [dv, dk]
  Acc* grad_normaliser;   // g_t [dk]
  Acc* grad_numerator;    // ∂o_t / d_t [dv]
  Acc* grad_key;          // G_t v_t [dk]
  Acc* grad_value;        // G_tᵀ φk_t [dv]

  BackwardScratch(Acc* at, int64_t dk, int64_t dv)
      : sum_columns(at),
        normaliser(sum_columns + dk * dv),
        recalled(normaliser + dk),
        grad_sum(recalled + dk),
        grad_sum_columns(grad_sum + dk * dv),
        grad_normaliser(grad_sum_columns + dk * dv),
        grad_numerator(grad_normaliser + dk),
        grad_key(grad_numerator + dv),
        grad_value(grad_key + dk) {}
};

// Forward in time: S_t by columns and z_t, then ∂φq_t = S_t ∂o_t / d_t + z_t ∂d_t.
template <typename T, int64_t KeyDim, int64_t ValueDim>
void grad_queries(const LinearAttentionBackward<T>& p, const HeadAt<KeyDim, ValueDim>& head,
                  const BackwardScratch<AccumulatorOf<T>>& s) {
  using Acc = AccumulatorOf<T>;
  const LinearAttentionShape& shape = p.shape;
  const int64_t head_index = head.index, b = head.b, h = head.h, dk = head.dk, dv = head.dv;
  transpose_or_zero(p.sum_in ? p.sum_in + head_index * shape.matrix_size() : nullptr, dk, dv,
                    s.sum_columns);
  copy_or_zero(p.normaliser_in ? p.normaliser_in + head_index * dk : nullptr, s.normaliser, dk);
  for (int64_t t = 0; t < shape.length; ++t) {
    const T* phi_k = p.phi_k.at(b, h, t);
    const T* v = p.v.at(b, h, t);
    for (int64_t a = 0; a < dk; ++a) s.normaliser[a] += load(phi_k[a]);
    const Acc denominator = p.denominators[head_index * shape.length + t];
    const Acc grad_denominator = linear_attention_grad_denominator(p, b, h, t, denominator, dv);
    fill_zero(s.recalled, dk);
    for (int64_t j = 0; j < dv; ++j) {
      Acc* column = s.sum_columns + j * dk;
      if (p.grad_outputs) {
        add_outer_and_weigh(column, load(v[j]), phi_k, load(p.grad_outputs.at(b, h, t)[j]),
                            s.recalled, dk);
      } else {
        add_scaled(column, phi_k, load(v[j]), dk);
      }
    }
    T* grad_phi_q = p.grad_phi_q.at(b, h, t);
    for (int64_t a = 0; a < dk; ++a)
      store(s.recalled[a] / denominator + s.normaliser[a] * grad_denominator, grad_phi_q + a);
  }
}

// Backward in time: G and g, ∂φk_t = G_t v_t + g_t, ∂v_t = G_tᵀ φk_t, and the initial state's
// gradient.
template <typename T, int64_t KeyDim, int64_t ValueDim>
void grad_keys_values(const LinearAttentionBackward<T>& p, const HeadAt<KeyDim, ValueDim>& head,
                      const BackwardScratch<AccumulatorOf<T>>& s) {
  using Acc = AccumulatorOf<T>;
  const LinearAttentionShape& shape = p.shape;
  const int64_t head_index = head.index, b = head.b, h = head.h, dk = head.dk, dv = head.dv;
  const int64_t matrix = dk * dv;
  const Acc* grad_sum_out = p.grad_sum_out ? p.grad_sum_out + head_index * matrix : nullptr;
  copy_or_zero(grad_sum_out, s.grad_sum, matrix);
  transpose_or_zero(grad_sum_out, dk, dv, s.grad_sum_columns);
  copy_or_zero(p.grad_normaliser_out ? p.grad_normaliser_out + head_index * dk : nullptr,
               s.grad_normaliser, dk);
  for (int64_t t = shape.length - 1; t >= 0; --t) {
    const Acc denominator = p.denominators[head_index * shape.length + t];
    const Acc grad_denominator = linear_attention_grad_denominator(p, b, h, t, denominator, dv);
    const T* phi_q = p.phi_q.at(b, h, t);
    const T* phi_k = p.phi_k.at(b, h, t);
    const T* v = p.v.at(b, h, t);
    if (p.grad_outputs) {
      const T* grad_out = p.grad_outputs.at(b, h, t);
      for (int64_t j = 0; j < dv; ++j) s.grad_numerator[j] = load(grad_out[j]) / denominator;
    }
    for (int64_t a = 0; a < dk; ++a) s.grad_normaliser[a] += load(phi_q[a]) * grad_denominator;
    fill_zero(s.grad_value, dv);
    for (int64_t a = 0; a < dk; ++a) {
      Acc* row = s.grad_sum + a * dv;
      if (p.grad_outputs) {
        add_outer_and_weigh(row, load(phi_q[a]), s.grad_numerator, load(phi_k[a]), s.grad_value,
                            dv);
      } else {
        weigh(row, load(phi_k[a]), s.grad_value, dv);
      }
    }
    fill_zero(s.grad_key, dk);
    for (int64_t j = 0; j < dv; ++j) {
      Acc* column = s.grad_sum_columns + j * dk;
      if (p.grad_outputs) {
        add_outer_and_weigh(column, s.grad_numerator[j], phi_q, load(v[j]), s.grad_key, dk);
      } else {
        weigh(column, load(v[j]), s.grad_key, dk);
      }
    }
    T* grad_phi_k = p.grad_phi_k.at(b, h, t);
    for (int64_t a = 0; a < dk; ++a) store(s.grad_key[a] + s.grad_normaliser[a], grad_phi_k + a);
    T* grad_v = p.grad_v.at(b, h, t);
    for (int64_t j = 0; j < dv; ++j) store(s.grad_value[j], grad_v + j);
  }
  if (p.grad_sum_in) copy_or_zero(s.grad_sum, p.grad_sum_in + head_index * matrix, matrix);
  if (p.grad_normaliser_in)
    copy_or_zero(s.grad_normaliser, p.grad_normaliser_in + head_index * dk, dk);
}

template <typename T>
void forward_heads(const LinearAttentionForward<T>& p, int64_t begin, int64_t end) {
  std::vector<AccumulatorOf<T>> numerator(static_cast<size_t>(p.shape.value_dim));
  with_fixed_dims(p.shape.key_dim, p.shape.value_dim, [&]<int64_t KeyDim, int64_t ValueDim>() {
    for (int64_t head = begin; head < end; ++head)
      forward_head<T>(p, HeadAt<KeyDim, ValueDim>(p.shape, head), numerator.data());
  });
}

template <typename T>
void backward_heads(const LinearAttentionBackward<T>& p, int64_t begin, int64_t end) {
  const LinearAttentionShape& shape = p.shape;
  with_fixed_dims(shape.key_dim, shape.value_dim, [&]<int64_t KeyDim, int64_t ValueDim>() {
    for (int64_t index = begin; index < end; ++index) {
      const HeadAt<KeyDim, ValueDim> head(shape, index);
      const BackwardScratch<AccumulatorOf<T>> scratch(
          p.workspace + index * shape.workspace_per_head(), head.dk, head.dv);
      grad_queries<T>(p, head, scratch);
      grad_keys_values<T>(p, head, scratch);
    }
  });
}

}  // namespace

void linear_attention_forward_cpu(const LinearAttentionForward<float>& p, int64_t begin,
                                  int64_t end) {
  forward_heads(p, begin, end);
}
void linear_attention_forward_cpu(const LinearAttentionForward<double>& p, int64_t begin,
                                  int64_t end) {
  forward_heads(p, begin, end);
}
void linear_attention_backward_cpu(const LinearAttentionBackward<float>& p, int64_t begin,
                                   int64_t end) {
  backward_heads(p, begin, end);
}
void linear_attention_backward_cpu(const LinearAttentionBackward<double>& p, int64_t begin,
                                   int64_t end) {
  backward_heads(p, begin, end);
}

}  // namespace memscript::kernels
